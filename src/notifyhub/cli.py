"""The `notifyhub` command: serve | migrate | restore | apikey | token | producers."""

from __future__ import annotations

import contextlib
import secrets
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from notifyhub.domain.auth import Scope

if TYPE_CHECKING:  # imported where used: `notifyhub --help` loads none of them
    from pydantic import ValidationError
    from rich.console import Console

    from notifyhub.db.repositories.apikeys import Rows
    from notifyhub.settings import Settings

app = typer.Typer(
    help="notifyhub: a notification hub with live Server-Sent Events.", no_args_is_help=True
)
apikey_app = typer.Typer(help="Create, list and revoke service API keys.", no_args_is_help=True)
app.add_typer(apikey_app, name="apikey")
producers_app = typer.Typer(help="Periodic producers (SQL checks).", no_args_is_help=True)
app.add_typer(producers_app, name="producers")
T = TypeVar("T")

DEV_USER = "alice"
DEV_TOKEN_TTL_S = 30 * 24 * 3600
"""The lifetime of the user token `make run` prints (the demo link keeps working)."""
TOKEN_TTL_S = 3600
"""`notifyhub token`'s default lifetime: a token minted at hand for a curl session."""


def _console(*, stderr: bool = False) -> Console:
    """Where the CLI prints (stdout, or stderr for errors): lines never wrapped, and a
    table as wide as it needs when the output is not a terminal (a log file, a pipe)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=True, width=None if stream.isatty() else 1000)


def _settings() -> Settings:
    """The settings from the environment; a value they refuse is a line naming the
    variable and exit 1 (not a traceback)."""
    from pydantic import ValidationError

    from notifyhub.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        raise _fail(f"invalid configuration: {_refused_settings(exc)}") from exc


def _refused_settings(exc: ValidationError) -> str:
    """Each refused setting as `NOTIFYHUB_NAME: why` (one the model refuses as a whole:
    why alone)."""
    lines = []
    for error in exc.errors():
        why = str(error["msg"]).removeprefix("Value error, ")
        names = "__".join(str(part) for part in error["loc"]).upper()
        lines.append(f"NOTIFYHUB_{names}: {why}" if names else why)
    return "; ".join(lines)


def _database_url(settings: Settings) -> str:
    if settings.database_url is None:
        raise typer.BadParameter(
            "set NOTIFYHUB_DATABASE_URL (or run `notifyhub serve` for embedded mode)"
        )
    return settings.database_url


def _fail(message: str) -> typer.Exit:
    """`message` on stderr (stdout carries what a command answers: a key, a token), and
    exit 1."""
    _console(stderr=True).print(message, style="red", markup=False)
    return typer.Exit(1)


def _store_errors() -> tuple[type[Exception], ...]:
    """What a store that cannot be reached or refuses the connection raises (down, a
    wrong host or port, no such database, a wrong password, a malformed URL): errors of
    the drivers the command has loaded (checked once one is raised, so none is imported
    for it)."""
    kinds: list[type[Exception]] = [OSError]
    if "asyncpg" in sys.modules:
        import asyncpg

        kinds += [asyncpg.PostgresError, asyncpg.InterfaceError]
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.exc import DBAPIError

        kinds.append(DBAPIError)
    if "redis" in sys.modules:
        from redis.exceptions import RedisError

        kinds.append(RedisError)
    return tuple(kinds)


STORES = {
    "asyncpg": "PostgreSQL (NOTIFYHUB_DATABASE_URL)",
    "sqlalchemy": "PostgreSQL (NOTIFYHUB_DATABASE_URL)",
    "redis": "Redis (NOTIFYHUB_REDIS_URL)",
}


@contextlib.contextmanager
def _reaching_stores(store: str = STORES["asyncpg"]) -> Iterator[None]:
    """A store error is a line naming the store (`store` unless the error's driver says
    which) and what failed, and exit 1: not a traceback."""
    try:
        yield
    except _store_errors() as exc:
        store = STORES.get(type(exc).__module__.split(".")[0], store)
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise _fail(f"could not work with {store}: {type(exc).__name__}: {detail}") from exc


def _store_settings() -> Settings:
    """The settings a command that reads the stores runs with. With no store URL set
    (embedded mode), the stores of the hub running on NOTIFYHUB_DATA_DIR, found through
    the `stores.json` it wrote; with none running, what to do instead."""
    settings = _settings()
    if not settings.embedded:
        return settings
    from notifyhub.embedded import running_stores

    data_dir = settings.data_dir.resolve()
    found = running_stores(data_dir)
    if found is None:
        raise _fail(
            f"no NOTIFYHUB_DATABASE_URL / NOTIFYHUB_REDIS_URL is set, and no embedded hub is "
            f"running on {data_dir} (NOTIFYHUB_DATA_DIR). Start one with `make run` (or "
            "`notifyhub serve`) and run this command again in another terminal, from the "
            "same directory or with the same NOTIFYHUB_DATA_DIR; or set both URLs to your "
            "own stores."
        )
    update: dict[str, object] = {"redis_url": found.redis_url, "database_url": found.database_url}
    if settings.jwt_secret is None and settings.jwt_algorithm == "HS256":
        update.update(jwt_secret=_dev_secret(settings.data_dir), dev_mode=True)
    return settings.model_validate({**settings.model_dump(), **update})


def _with_connection(settings: Settings, work: Callable[[Rows], Awaitable[T]]) -> T:
    """`work` on one bare asyncpg connection, each of its statements committing on its
    own: the `apikey` commands load no SQLAlchemy, and answer in a fraction of a second."""
    import asyncio

    from notifyhub.db.driver import connect

    async def run() -> T:
        connection = await connect(_database_url(settings))
        try:
            return await work(connection)
        finally:
            await connection.close()

    with _reaching_stores():
        return asyncio.run(run())


def _dev_secret(data_dir: Path) -> str:
    path = data_dir / "dev-jwt-secret"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


def _embedded_settings(settings: Settings, url: str, stack: contextlib.ExitStack) -> Settings:
    """Lock the data directory, start the stores and say where they listen (`stores.json`,
    for the CLI in another terminal); `stack` undoes all three."""
    from notifyhub.datalock import DataDirBusy, DataDirLock
    from notifyhub.embedded import (
        EmbeddedServers,
        EmbeddedUnavailable,
        publish_stores,
        require_extra,
    )

    try:
        require_extra()
        lock = DataDirLock.acquire(settings.data_dir, url)
    except (EmbeddedUnavailable, DataDirBusy) as exc:
        raise _fail(str(exc)) from exc
    stack.callback(lock.release)
    servers = EmbeddedServers.start(settings.data_dir)
    stack.callback(servers.stop)
    stack.callback(publish_stores(settings.data_dir, servers, url).unlink, missing_ok=True)
    update: dict[str, object] = {
        "redis_url": servers.redis_url,
        "database_url": servers.database_url,
    }
    if settings.jwt_secret is None and settings.jwt_algorithm == "HS256":
        update.update(jwt_secret=_dev_secret(settings.data_dir), dev_mode=True)
    return settings.model_validate({**settings.model_dump(), **update})


DEV_KEYS = (
    ("admin", Scope.ADMIN, "dev-credentials.txt"),
    ("publish", Scope.PUBLISH, "dev-publish-key.txt"),
    ("consume", Scope.CONSUME, "dev-consume-key.txt"),
)
"""The keys `make run` makes on the first start of a data directory: scope, file."""


def _dev_key(settings: Settings, label: str, scope: Scope, path: Path) -> str:
    """The dev key kept in `path`, made (unbound, named `dev-<label>`) if missing."""
    from notifyhub.errors import NotifyhubError
    from notifyhub.services import apikeys

    if not path.exists():

        async def make(connection: Rows) -> str:
            names = [f"dev-{label}", f"dev-{label}-{secrets.token_hex(3)}"]  # (file lost)
            for name in names:
                try:  # a taken name (a 409) is no failed statement: try the next
                    return await apikeys.create_key(connection, name=name, scope=scope, tenant=None)
                except NotifyhubError:
                    continue
            raise RuntimeError(f"no free name for the dev {label} key")

        path.write_text(_with_connection(settings, make))
        path.chmod(0o600)
    return path.read_text().strip()


def _dev_credentials(settings: Settings, url: str) -> Callable[[], None]:
    """First embedded start: make an admin, a publish and a consume key. Returns what
    prints them, a user token and the demo URL (called once the hub listens, so they are
    the last lines of the start-up)."""
    from notifyhub.services.tokens import TokenService

    keys = [
        (label, _dev_key(settings, label, scope, settings.data_dir / file))
        for label, scope, file in DEV_KEYS
    ]
    token = TokenService(settings).mint_user_token(DEV_USER, ttl_s=DEV_TOKEN_TTL_S)
    lifetime = _duration(DEV_TOKEN_TTL_S)

    def show() -> None:
        console = _console()
        console.print("[bold green]notifyhub (embedded dev mode)[/]")
        for label, key in keys:
            console.print(f"  {label + ' API key':<15} : [cyan]{key}[/]")
        who = f"user {DEV_USER!r}, valid {lifetime}"
        console.print(f"  user token      : [cyan]{token}[/]  ({who})")
        console.print(f"  demo inbox      : {url}/demo#token={token}")
        console.print(f"  data, logs      : {settings.data_dir.resolve()}  (Ctrl-C stops it all)")
        console.print(
            "  more keys       : notifyhub apikey create --name N --scope S (another terminal)"
        )
        console.print(
            f"  more tokens     : notifyhub token --user U (valid {_duration(TOKEN_TTL_S)}; "
            "--ttl 30d for longer)"
        )

    return show


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    workers: Annotated[
        int, typer.Option(min=1, help="Hub processes sharing the port (docs/scaling.md).")
    ] = 1,
    access_log: Annotated[
        bool, typer.Option(help="Log every request (metrics count them anyway).")
    ] = False,
) -> None:
    """Run the hub (with embedded Valkey + PostgreSQL when no URLs are configured)."""
    import logging

    from notifyhub.process.server import exit_on_signals

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings()
    url = f"http://{host}:{port}"
    embedded = settings.embedded
    with exit_on_signals(), contextlib.ExitStack() as stack:
        if embedded:  # first, so a busy data directory is refused before the app loads
            settings = _embedded_settings(settings, url, stack)
        from notifyhub.api.app import create_app
        from notifyhub.db.migrate import upgrade_head
        from notifyhub.process.gc import CollectorPolicy
        from notifyhub.process.server import HubServer
        from notifyhub.process.supervisor import run_workers, server_config

        with _reaching_stores():
            upgrade_head(_database_url(settings))
        logging.getLogger("alembic").setLevel(logging.WARNING)  # /readyz's check: 2 lines each
        show_credentials = _dev_credentials(settings, url) if embedded else None
        if workers > 1:
            if show_credentials is not None:
                show_credentials()
            status = run_workers(settings, host, port, workers, access_log=access_log)
            raise typer.Exit(status)
        fastapi_app = create_app(settings)
        config = server_config(fastapi_app, settings, access_log=access_log, host=host, port=port)
        collector = CollectorPolicy.of(settings.gc)
        HubServer(config, fastapi_app, collector, on_started=show_credentials).run()


@app.command()
def migrate() -> None:
    """Apply database migrations (idempotent)."""
    from notifyhub.db.migrate import upgrade_head

    url = _database_url(_store_settings())
    with _reaching_stores():
        upgrade_head(url)
    typer.echo("migrations applied")


@app.command()
def restore() -> None:
    """Rebuild Redis from PostgreSQL: topic caches, preferences, the delayed queue and,
    in durable inbox mode, every inbox (idempotent; safe while the hub runs)."""
    import asyncio

    from notifyhub.features import restore_redis

    settings = _store_settings()
    if settings.redis_url is None:
        raise typer.BadParameter("set NOTIFYHUB_REDIS_URL")
    _database_url(settings)
    with _reaching_stores():
        asyncio.run(restore_redis(settings))
    typer.echo("Redis restored from PostgreSQL")


@apikey_app.command("create")
def apikey_create(
    name: Annotated[str, typer.Option(help="A unique name for the key.")],
    scope: Annotated[Scope, typer.Option(help="publish, consume or admin.")],
    tenant: Annotated[str | None, typer.Option(help="Bind the key to one tenant.")] = None,
) -> None:
    """Create a key and print it once (it is stored hashed)."""
    from notifyhub.errors import NotifyhubError
    from notifyhub.services import apikeys

    _check_key(name, scope, tenant)
    try:
        key = _with_connection(
            _store_settings(),
            lambda c: apikeys.create_key(c, name=name, scope=scope, tenant=tenant),
        )
    except NotifyhubError as exc:
        raise typer.BadParameter(exc.detail) from exc
    typer.echo(key)


def _check_key(name: str, scope: Scope, tenant: str | None) -> None:
    """The name and tenant `POST /v1/admin/api-keys` admits: a key the API would refuse
    (an empty name, a space or slash in it, a tenant no request can name) is refused here
    too, naming the option."""
    from pydantic import ValidationError

    from notifyhub.api.schemas.apikeys import ApiKeyIn

    try:
        ApiKeyIn(name=name, scope=scope, tenant=tenant)
    except ValidationError as exc:
        error = exc.errors()[0]
        option = f"--{error['loc'][0]}" if error["loc"] else None
        raise typer.BadParameter(str(error["msg"]), param_hint=option) from exc


def _iso(moment: datetime | None) -> str:
    """A full RFC 3339 time in UTC with milliseconds, as the API shows times ('' none)."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@apikey_app.command("list")
def apikey_list() -> None:
    """List keys: names, scopes, tenants, when made and revoked (UTC); never the keys."""
    from rich.table import Table

    from notifyhub.services import apikeys

    keys = _with_connection(_store_settings(), apikeys.list_keys)
    table = Table("name", "scope", "tenant")
    for column in ("created", "revoked"):
        table.add_column(column, no_wrap=True, min_width=24)
    for k in keys:
        table.add_row(
            k.name, k.scope.value, k.tenant or "*", _iso(k.created_at), _iso(k.revoked_at)
        )
    _console().print(table)


@apikey_app.command("revoke")
def apikey_revoke(
    name: Annotated[str, typer.Argument(help="The key's name.")],
    tenant: Annotated[
        str | None, typer.Option(help="The key's tenant (default: the hub-wide key).")
    ] = None,
) -> None:
    """Revoke a key: running hubs refuse it at once and end the tails it opened."""
    import asyncio

    from notifyhub.services import apikeys

    settings = _store_settings()
    key_id = _with_connection(settings, lambda c: apikeys.revoke_key(c, name, tenant))
    if key_id is None:
        raise typer.BadParameter(f"no active key named {name!r}")
    try:
        asyncio.run(_tell_hubs(settings, key_id))
    except Exception as exc:  # revoked all the same: hubs see it within their key cache TTL
        typer.echo(f"revoked {name}; running hubs could not be told at once ({exc})")
        return
    typer.echo(f"revoked {name}")


_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(ttl: str) -> int:
    """`3600`, `90s`, `45m`, `1h` or `30d` in seconds."""
    number, unit = (ttl[:-1], ttl[-1]) if ttl[-1:] in _UNITS_S else (ttl, "s")
    if not number.isdigit() or int(number) == 0:
        raise typer.BadParameter(f"{ttl!r}: give seconds or a number and s, m, h or d (1h)")
    return int(number) * _UNITS_S[unit]


def _duration(seconds: int) -> str:
    """`30 days`, `1 hour`, `90 seconds`: the largest whole unit."""
    for name, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {name}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


async def _tell_hubs(settings: Settings, key_id: str) -> None:
    """Announce the revocation on the hubs' Pub/Sub, through a client of its own (not
    the hub's composition root, which would load every feature)."""
    from notifyhub.store.client import close, create_redis
    from notifyhub.store.keys import Keys
    from notifyhub.store.revocations import announce_key_revoked

    if settings.redis_url is None:
        raise ValueError("NOTIFYHUB_REDIS_URL is not set")
    redis = create_redis(settings.redis_url, pool_size=1)
    try:
        keys = Keys(settings.redis_prefix, pubsub_shards=settings.redis_pubsub_shards)
        await announce_key_revoked(redis, keys, key_id)
    finally:
        await close(redis)


@app.command()
def token(
    user: Annotated[str, typer.Option(help="The user id (`sub`).")],
    tenant: Annotated[str, typer.Option(help="The tenant claim.")] = "default",
    ttl: Annotated[
        str,
        typer.Option(
            help="Lifetime: seconds, or a number and s, m, h or d (`30d`: as long as the "
            "token `make run` prints).",
        ),
    ] = "1h",
) -> None:
    """Mint a development user token (HS256 secret only), valid 1 hour unless --ttl says
    otherwise. The token goes to stdout, its lifetime to stderr."""
    from notifyhub.errors import NotifyhubError
    from notifyhub.services.tokens import TokenService

    lifetime_s = _seconds(ttl)
    try:
        until = _iso(datetime.now(UTC) + timedelta(seconds=lifetime_s))
    except OverflowError as exc:  # past the year 9999
        raise typer.BadParameter(f"{ttl!r}: too long a lifetime", param_hint="--ttl") from exc
    settings = _settings()
    if settings.jwt_secret is None and settings.embedded:
        settings = type(settings)(jwt_secret=_dev_secret(settings.data_dir), dev_mode=True)
    try:
        minted = TokenService(settings).mint_user_token(user, tenant, lifetime_s)
    except NotifyhubError as exc:
        raise typer.BadParameter(exc.detail) from exc
    typer.echo(minted)
    typer.echo(f"valid {_duration(lifetime_s)}, until {until}", err=True)


@producers_app.command("check")
def producers_check(
    path: Annotated[
        Path, typer.Argument(help="The producers YAML file.", exists=True, dir_okay=False)
    ],
) -> None:
    """Validate a producers file: schema, read-only queries, templates."""
    from notifyhub.errors import NotifyhubError
    from notifyhub.workers.producers import load

    console = _console()
    try:
        found = load(path)
    except NotifyhubError as exc:
        console.print(f"[red]invalid[/]: {exc.detail}")
        raise typer.Exit(1) from exc
    for producer in found:
        console.print(
            f"ok  {producer.name}: every {producer.interval_s:g}s -> {producer.recipients}"
        )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
