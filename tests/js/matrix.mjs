// @stomp/stompjs in its default configuration (every version offered, 10 s
// heart-beats, no connect headers) against the embedded broker: the client
// matrix scenario of tests/test_client_matrix.py, step by step.
//
//     node matrix.mjs <ws-url> <queue>
//
// Prints one JSON line: each step's result, "ok", "skip: why" or "failed: why".
// The only non-default setting is the WebSocket: Node 20 has no global one, so
// stompjs gets the `ws` package's, with the subprotocols of its versions.
import { Client } from "@stomp/stompjs";
import { WebSocket } from "ws";

const [url, queue] = process.argv.slice(2);
const results = {};
let current = null;

function report(code) {
  process.stdout.write(JSON.stringify(results) + "\n");
  process.exit(code);
}

function fail(error) {
  if (current !== null && !(current in results)) {
    results[current] = `failed: ${error.message || error}`;
  }
  process.stderr.write(`matrix.mjs: ${error.stack || error}\n`);
  report(1);
}

setTimeout(() => fail(new Error("timed out")), 30000);

async function step(name, body) {
  current = name;
  await body();
  results[name] = "ok";
}

const client = new Client({
  brokerURL: url,
  webSocketFactory: () => new WebSocket(url, client.stompVersions.protocolVersions()),
  reconnectDelay: 0,
  onStompError: (frame) => fail(new Error(`ERROR frame: ${frame.headers.message} ${frame.body}`)),
  onWebSocketError: (event) => fail(new Error(`WebSocket error: ${event.message || event}`)),
});

// Messages of the subscription, in order, handed to whoever waits for the next.
const arrived = [];
const waiting = [];
function nextMessage() {
  if (arrived.length) return Promise.resolve(arrived.shift());
  return new Promise((resolve) => waiting.push(resolve));
}
function receipt(id) {
  return new Promise((resolve) => client.watchForReceipt(id, resolve));
}
async function expectBody(expected) {
  const message = await nextMessage();
  if (message.body !== expected) throw new Error(`got ${message.body}, wanted ${expected}`);
  return message;
}

client.onConnect = async (connected) => {
  try {
    results.connect = "ok";
    const version = connected.headers.version ?? "1.0";
    await step("subscribe", async () => {
      const subscribed = receipt("r-sub");
      client.subscribe(
        queue,
        (message) => (waiting.length ? waiting.shift()(message) : arrived.push(message)),
        { ack: version === "1.0" ? "client" : "client-individual", receipt: "r-sub" },
      );
      await subscribed;
    });
    await step("send", async () => client.publish({ destination: queue, body: "one" }));
    await step("receipt", async () => {
      const got = receipt("r-two");
      client.publish({ destination: queue, body: "two", headers: { receipt: "r-two" } });
      await got;
    });
    let first;
    await step("receive", async () => (first = await expectBody("one")));
    await step("ack", async () => first.ack());
    if (version === "1.0") {
      (await expectBody("two")).ack();
      results.nack = "skip: STOMP 1.0 has no NACK";
    } else {
      await step("nack", async () => {
        (await expectBody("two")).nack();
        (await expectBody("two")).ack();
      });
    }
    await step("transaction", async () => {
      const aborted = client.begin();
      client.publish({ destination: queue, body: "aborted", headers: { transaction: aborted.id } });
      aborted.abort();
      const committed = client.begin();
      client.publish({
        destination: queue,
        body: "committed",
        headers: { transaction: committed.id },
      });
      committed.commit();
      (await expectBody("committed")).ack();
    });
    // deactivate() sends DISCONNECT and waits for its RECEIPT (or the close).
    await step("disconnect", async () => client.deactivate());
    report(0);
  } catch (error) {
    fail(error);
  }
};

current = "connect";
client.activate();
