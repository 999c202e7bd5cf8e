// One scenario of everyday nats.js v3 use (JetStream, consumers with priority groups, Direct Get, KV, object store),
// run against the server at argv[2]; prints one JSON array of what the client saw, with times,
// ids and server names left out, for tests/natsjs/test_natsjs.py to compare between servers.
import { createHash } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";

const out = [];
const seen = (label, value) => out.push([label, value]);
const text = (data) => new TextDecoder().decode(data);
const apiError = async (label, promise) => {
  try {
    seen(label, { answer: (await promise) ?? null });
  } catch (err) {
    const api = typeof err.apiError === "function" ? err.apiError() : null;
    seen(label, api ? { error: err.name, ...api } : { error: err.name, message: err.message });
  }
};

const nc = await connect({ servers: process.argv[2], timeout: 10_000 });
try {
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const js = jetstream(nc, { timeout: 10_000 });

  const created = await jsm.streams.add({ name: "JS1", subjects: ["js1.>"], num_replicas: 3, max_msgs_per_subject: 3, allow_direct: true });
  seen("stream", { name: created.config.name, subjects: created.config.subjects, msgs: created.state.messages });
  for (let i = 1; i <= 5; i++) {
    const ack = await js.publish(`js1.${i % 2 ? "odd" : "even"}`, `m${i}`, { msgID: `id-${i}` });
    seen("ack", { seq: ack.seq, duplicate: ack.duplicate });
  }
  const dup = await js.publish("js1.odd", "again", { msgID: "id-1" });
  seen("duplicate ack", { seq: dup.seq, duplicate: dup.duplicate });
  const expected = js.publish("js1.odd", "m6", { expect: { lastSequence: 4 } });
  await apiError("wrong last sequence", expected);

  const last = await jsm.streams.getMessage("JS1", { last_by_subj: "js1.odd" });
  seen("msg get", { seq: last.seq, subject: last.subject, data: text(last.data) });
  // A Direct Get may be answered by a replica that has not applied the newest write yet (ADR-31: that is
  // its trade-off, on either server): ask again, a bounded number of times, until one answers m4, the
  // last even message; an older answer must still be a message of that subject.
  let direct = await jsm.direct.getMessage("JS1", { last_by_subj: "js1.even" });
  for (let tries = 0; direct.seq !== 4 && tries < 100; tries++) {
    if (direct.subject !== "js1.even") throw new Error(`direct get answered ${direct.subject}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    direct = await jsm.direct.getMessage("JS1", { last_by_subj: "js1.even" });
  }
  seen("direct get", { seq: direct.seq, subject: direct.subject, data: text(direct.data) });
  await apiError("msg get missing", jsm.streams.getMessage("JS1", { seq: 99 }));

  await jsm.consumers.add("JS1", { durable_name: "c1", ack_policy: AckPolicy.Explicit, filter_subject: "js1.odd" });
  const consumer = await js.consumers.get("JS1", "c1");
  const fetched = [];
  const batch = await consumer.fetch({ max_messages: 3, expires: 2_000 });
  for await (const m of batch) {
    fetched.push([m.subject, text(m.data), m.info.deliveryCount]);
    await m.ackAck();
    if (fetched.length === 3) break;
  }
  seen("fetched", fetched);
  const info = await consumer.info();
  seen("consumer", { pending: info.num_pending, ack_pending: info.num_ack_pending, delivered: info.delivered.stream_seq });
  await apiError("consumer missing", jsm.consumers.info("JS1", "nope"));

  // priority groups (ADR-42), as nats.js asks for them: an overflow consumer's minimum, a pinned client
  await jsm.consumers.add("JS1", {
    durable_name: "ovf", ack_policy: AckPolicy.Explicit, priority_policy: "overflow", priority_groups: ["jobs"],
  });
  const ovf = await js.consumers.get("JS1", "ovf");
  const below = [];
  for await (const m of await ovf.fetch({ max_messages: 2, expires: 1_000, group: "jobs", min_pending: 100 })) {
    below.push(text(m.data));
  }
  seen("overflow, minimum not reached", below);
  const above = [];
  for await (const m of await ovf.fetch({ max_messages: 2, expires: 2_000, group: "jobs", min_pending: 1 })) {
    above.push(text(m.data));
    if (above.length === 2) break;
  }
  seen("overflow, minimum reached", above);
  await jsm.consumers.add("JS1", {
    durable_name: "pin", ack_policy: AckPolicy.None, priority_policy: "pinned_client", priority_groups: ["g"],
  });
  const pinned = await js.consumers.get("JS1", "pin");
  const pinnedMsgs = [];
  for await (const m of await pinned.fetch({ max_messages: 2, expires: 2_000, group: "g" })) {
    pinnedMsgs.push([text(m.data), (m.headers?.get("Nats-Pin-Id") ?? "").length]);
    if (pinnedMsgs.length === 2) break;
  }
  seen("pinned fetch", pinnedMsgs);
  const pinInfo = await pinned.info();
  seen("pinned info", pinInfo.priority_groups.map((g) => [g.group, (g.pinned_client_id ?? "").length]));
  await apiError("unpin", jsm.consumers.unpin("JS1", "pin", "g"));
  seen("unpinned info", (await pinned.info()).priority_groups.map((g) => [g.group, g.pinned_client_id ?? null]));

  const kvm = new Kvm(nc);
  const kv = await kvm.create("jsbucket", { history: 3, replicas: 3 });
  const r1 = await kv.put("a.b", "one");
  const r2 = await kv.update("a.b", "two", r1);
  await apiError("stale update", kv.update("a.b", "three", r1));
  await kv.create("c", "new");
  await apiError("create existing", kv.create("c", "again"));
  await kv.delete("c");
  const entry = await kv.get("a.b");
  seen("kv get", { value: entry.string(), revision: entry.revision === r2, operation: entry.operation });
  const history = [];
  for await (const e of await kv.history({ key: "a.b" })) history.push([e.key, e.string(), e.operation]);
  seen("kv history", history);
  const keys = [];
  for await (const k of await kv.keys()) keys.push(k);
  seen("kv keys", keys.sort());
  const watched = [];
  const watch = await kv.watch({ key: "a.>" });
  const changes = (async () => {
    for await (const e of watch) {
      watched.push([e.key, e.string(), e.operation]);
      if (watched.length === 2) break;
    }
  })();
  await kv.put("a.z", "late");
  await changes;
  seen("kv watch", watched);
  const status = await kv.status();
  seen("kv status", { values: status.values, history: status.history, replicas: status.replicas });

  const objm = new Objm(nc);
  const os = await objm.create("jsobj", { replicas: 3 });
  const blob = new Uint8Array(1_500_000).map((_, i) => (i * 7) % 251);
  const put = await os.putBlob({ name: "blob.bin", description: "a blob" }, blob);
  seen("object put", { size: put.size, chunks: put.chunks, digest: put.digest });
  const got = await os.getBlob("blob.bin");
  seen("object get", createHash("sha256").update(got).digest("hex") === createHash("sha256").update(blob).digest("hex"));
  await os.putBlob({ name: "small.txt" }, new TextEncoder().encode("hello"));
  seen("object list", (await os.list()).map((o) => [o.name, o.size]).sort());
  await os.delete("blob.bin");
  seen("object after delete", (await os.list()).map((o) => o.name).sort());
  await os.seal();
  seen("object sealed", (await os.status()).sealed);
} finally {
  await nc.close();
}
console.log(JSON.stringify(out));
