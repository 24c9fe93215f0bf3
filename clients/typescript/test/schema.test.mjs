// The client's types are the server's: it compiles against what openapi-typescript makes of a real server's
// /openapi.json now (src/schema.ts is that, committed; when it is behind, the test says so).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { generate } from "../scripts/generate.mjs";
import { startServer } from "./server.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));

test("the client compiles against the served schema (and says when the committed types are behind it)", async (t) => {
  const server = await startServer();
  let fresh;
  try {
    const spec = await (await fetch(`${server.url}/openapi.json`)).json();
    assert.ok(Object.keys(spec.paths).every((p) => p.startsWith("/v1/")));
    fresh = await generate(spec);
  } finally {
    await server.stop();
  }
  // Compile the client against the fresh types, in a copy (the committed files stay as they are).
  const copy = mkdtempSync(join(tmpdir(), "engram-ts-schema-"));
  try {
    cpSync(join(root, "src"), join(copy, "src"), { recursive: true });
    writeFileSync(join(copy, "src", "schema.ts"), fresh);
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    const config = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8"));
    writeFileSync(join(copy, "tsconfig.json"), JSON.stringify({ ...config, compilerOptions: { ...config.compilerOptions, noEmit: true } }));
    execFileSync(process.execPath, [tsc, "-p", copy], { stdio: "pipe" });
  } catch (err) {
    assert.fail(`the client does not compile against the server's schema: ${err.stdout ?? err}`);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
  // A schema change the client does not use (a new route, a reworded description) leaves it correct: said, not
  // failed, so that a server change elsewhere does not break this package's build.
  const committed = readFileSync(join(root, "src", "schema.ts"), "utf8");
  if (committed !== fresh) t.diagnostic("src/schema.ts is behind the server's schema: run `npm run schema`");
});
