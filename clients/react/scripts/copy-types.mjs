// The package's types import the browser client's as "./notifyhub.js": ship that file.
import { copyFileSync } from "node:fs";

copyFileSync(
  new URL("../../../src/notifyhub/static/notifyhub.d.ts", import.meta.url),
  new URL("../dist/notifyhub.d.ts", import.meta.url),
);
