// The client against a real `engram serve` (started by test/server.mjs): memories, search, learning, failures,
// errors as the library's, API keys, and the generic typed call.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { AccessDenied, EngramClient, EngramError, NotAuthenticated, NotFound, StorageError, ValidationError } from "../dist/index.js";
import { startServer } from "./server.mjs";

let server;
let alice;

before(async () => {
  server = await startServer({ keys: ["alice", "bob"] });
  alice = new EngramClient(server.url, { apiKey: server.tokens.alice });
});
after(async () => {
  assert.equal(await server.stop(), 0); // a graceful shutdown: the vector queue drained, exit code 0
});

describe("memories", () => {
  test("remember, search, get, update, history, forget", async () => {
    const m = await alice.remember("The staging database runs PostgreSQL 15 on port 5433", { tags: ["db"] });
    assert.equal(m.agent, "alice");
    assert.deepEqual(m.tags, ["db"]);
    await alice.remember("Alice prefers tabs over spaces in Go code", { kind: "preference" });

    const hits = await alice.search("which port does the staging database use", { limit: 3 });
    assert.equal(hits[0].memory.id, m.id);
    assert.ok(hits[0].relevance > 0 && hits[0].relevance <= 1);

    assert.equal((await alice.get(m.id)).content, m.content);
    const changed = await alice.update(m.id, { content: "The staging database runs PostgreSQL 16 on port 5433" });
    assert.match(changed.content, /PostgreSQL 16/);
    assert.deepEqual((await alice.history(m.id)).map((c) => c.action), ["create", "update"]);

    await alice.forget(m.id);
    await assert.rejects(alice.get(m.id), (err) => err instanceof NotFound && err.status === 404);
  });

  test("a batch and a listing", async () => {
    const made = await alice.rememberMany([{ content: "Deploys go out on Tuesdays" }, { content: "CI runs on two cores" }]);
    assert.equal(made.length, 2);
    const listed = await alice.list({ limit: 100 });
    assert.ok(made.every((m) => listed.some((l) => l.id === m.id)));
  });

  test("context renders a prompt within its budget", async () => {
    await alice.remember("Run the migrations before deploying the API");
    const ctx = await alice.context("deploy the API", { token_budget: 200 });
    assert.ok(ctx.prompt_tokens <= 200);
    assert.match(ctx.prompt, /migrations/);
  });
});

describe("learning and failures", () => {
  test("outcomes make a recommendation", async () => {
    for (let i = 0; i < 4; i++) {
      await alice.recordOutcome("the API times out under load", "add-retry-with-backoff", "success");
      await alice.recordOutcome("the API times out under load", "raise-the-timeout", "failure");
    }
    const s = await alice.suggest("the API times out under load");
    assert.equal(s.recommended, "add-retry-with-backoff");
    assert.equal(s.options[0].action, "add-retry-with-backoff");
  });

  test("a failure's fix is found again", async () => {
    await alice.recordFailure("ModuleNotFoundError: No module named 'yaml'", { solution: "pip install pyyaml" });
    const fixes = await alice.solutions("ModuleNotFoundError: No module named 'yaml'");
    assert.equal(fixes[0].solution, "pip install pyyaml");
  });
});

describe("errors are the library's", () => {
  test("bad input is a ValidationError and says why", async () => {
    await assert.rejects(alice.remember("x", { kind: "bogus" }), (err) => {
      assert.ok(err instanceof ValidationError);
      assert.ok(err instanceof EngramError);
      assert.equal(err.status, 422);
      assert.match(err.message, /kind/);
      return true;
    });
  });

  test("keys decide the agent", async () => {
    const anonymous = new EngramClient(server.url);
    await assert.rejects(anonymous.search("anything"), NotAuthenticated);
    await assert.rejects(alice.list({ agent: "bob" }), AccessDenied);
    const bob = new EngramClient(server.url, { apiKey: server.tokens.bob });
    const secret = await bob.remember("Bob's deploy key lives in the vault");
    await assert.rejects(alice.get(secret.id), NotFound); // another agent's memory does not exist for alice
    assert.deepEqual((await bob.me()).agent, "bob");
  });

  test("an unreachable server is a StorageError", async () => {
    const nowhere = new EngramClient("http://127.0.0.1:9", { timeoutMs: 2000 });
    await assert.rejects(nowhere.health(), StorageError);
    assert.throws(() => new EngramClient("ftp://x"), ValidationError);
  });
});

describe("the whole API through call", () => {
  test("typed by path and method", async () => {
    const stats = await alice.call("get", "/v1/stats", { query: {} });
    assert.equal(stats.agent, "alice");
    assert.ok(stats.memories >= 1);
    const chosen = await alice.call("post", "/v1/choose", { body: { context: "pick a queue", options: ["sqs", "redis"] } });
    assert.ok(["sqs", "redis"].includes(chosen.chosen));
    const health = await alice.health();
    assert.equal(health.status, "ok");
    assert.ok(health.store.ready && health.embedder.ready);
  });
});
