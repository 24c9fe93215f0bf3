// Starts a real `engram serve` on a free loopback port over a fresh store, for the tests (ENGRAM_BIN: another
// command than `engram` from PATH). With `keys`, API keys are created first (`engram keys create --json`).
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ENGRAM = process.env.ENGRAM_BIN ?? "engram";

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

export async function startServer({ keys = [] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "engram-ts-"));
  const store = join(dir, "store");
  const env = { ...process.env, ENGRAM_HOME: join(dir, "home") };
  const tokens = {};
  for (const agent of keys) {
    const out = execFileSync(ENGRAM, ["keys", "create", "--agent", agent, "--store", store, "--json"], { env });
    tokens[agent] = JSON.parse(out.toString()).token;
  }
  const port = await freePort();
  const child = spawn(ENGRAM, ["serve", "--port", String(port), "--store", store], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr.on("data", (chunk) => { log += chunk; });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`engram serve exited (${child.exitCode}): ${log}`);
    try {
      if ((await fetch(`${url}/v1/health`)).ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`engram serve did not start: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    tokens,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once("exit", resolve)));
      rmSync(dir, { recursive: true, force: true });
      return child.exitCode;
    },
  };
}
