// The client's methods beyond the common calls, against a real `engram serve` (test/server.mjs): keyed memories,
// counts and clearing, learning's loop, failure patterns, sharing, knowledge files, the audit trail, sessions,
// episodes and routing.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { EngramClient, NotFound, ValidationError } from "../dist/index.js";
import { startServer } from "./server.mjs";

let server;
let alice;
let bob;

before(async () => {
  server = await startServer({ keys: ["alice", "bob", "carol"] });
  alice = new EngramClient(server.url, { apiKey: server.tokens.alice });
  bob = new EngramClient(server.url, { apiKey: server.tokens.bob });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

describe("memories", () => {
  test("a keyed memory's current value, a count, and clearing an agent", async () => {
    await alice.remember("Alice edits with vim", { kind: "preference", key: "editor" });
    await alice.remember("Alice edits with emacs", { kind: "preference", key: "editor" });
    assert.match((await alice.recallKey("editor")).content, /emacs/);
    await assert.rejects(alice.recallKey("no-such-key"), NotFound);

    const carol = new EngramClient(server.url, { apiKey: server.tokens.carol });
    await carol.rememberMany([{ content: "Carol's first note" }, { content: "Carol's second note" }]);
    assert.equal(await carol.count(), 2);
    assert.equal(await carol.clear("carol"), 2);
    assert.equal(await carol.count(), 0);
  });
});

describe("learning", () => {
  test("choose among options, a pending decision resolved, feedback", async () => {
    assert.ok(["sqs", "redis"].includes(await alice.choose("pick a queue", ["sqs", "redis"])));
    const decision = await alice.recordOutcome("the nightly job is slow", "add-an-index", "pending");
    assert.ok((await alice.pending()).some((m) => m.id === decision.id));
    await alice.resolve(decision.id, "success");
    assert.ok(!(await alice.pending()).some((m) => m.id === decision.id));
    const credited = await alice.feedback([decision.id], "success");
    assert.ok(Array.isArray(credited.memories));
  });

  test("failure patterns and a pre-flight check", async () => {
    await alice.recordFailure("ConnectionRefusedError: db at 10.0.0.5:5432 refused", { solution: "start the db" });
    await alice.recordFailure("ConnectionRefusedError: db at 10.0.0.9:5432 refused", { solution: "start the db" });
    const patterns = await alice.failurePatterns();
    assert.ok(patterns.some((p) => p.occurrences >= 2));
    assert.ok(Array.isArray(await alice.preflight("connect to the db")));
  });
});

describe("sharing, knowledge and the audit trail", () => {
  test("a shared memory is visible to the other agent until it is unshared", async () => {
    const note = await alice.remember("The release checklist lives in docs/release.md");
    assert.equal(await alice.share({ from_agent: "alice", to_agent: "bob", memory_ids: [note.id] }), 1);
    assert.equal((await bob.get(note.id)).content, note.content);
    assert.equal(await alice.unshare({ from_agent: "alice", to_agent: "bob", memory_ids: [note.id] }), 1);
    await assert.rejects(bob.get(note.id), NotFound);
  });

  test("a knowledge file out and in, and the audit chain", async () => {
    const exported = await alice.exportKnowledge();
    assert.ok(exported.count >= 1);
    assert.equal(typeof exported.content, "string");
    // Alice's own file comes back as what she has; in bob's name its ids are another agent's: refused, whole.
    assert.equal(typeof (await alice.importKnowledge(exported.content, { dry_run: true })).count, "number");
    await assert.rejects(bob.importKnowledge(exported.content), (err) => err instanceof ValidationError && /nothing was imported/.test(err.message));
    assert.ok((await alice.auditLog({ limit: 5 })).length > 0);
    assert.equal((await alice.verifyAudit()).ok, true);
  });
});

describe("sessions, episodes and routing", () => {
  test("a thread's short-term window", async () => {
    await alice.sessionAdd("we agreed to ship on Friday", { session: "standup" });
    const window = await alice.session({ session: "standup" });
    assert.ok(window.messages.some((m) => m.content === "we agreed to ship on Friday"));
  });

  test("an episode followed from start to end", async () => {
    const started = await alice.startEpisode("deploy the API");
    await alice.episodeEvent({ episode_id: started.episode_id, kind: "step", data: { ok: true } });
    const ended = await alice.endEpisode({ episode_id: started.episode_id, outcome: "success" });
    assert.equal(ended.id, started.episode_id);
    assert.equal(ended.outcome, "success");
  });

  test("a task routed to a model, with the reason", async () => {
    const choice = await alice.route("summarise this changelog", ["small-model", "large-model"]);
    assert.ok(["small-model", "large-model"].includes(choice.model));
    assert.equal(typeof choice.reason, "string");
  });
});
