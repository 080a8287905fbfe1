// @stomp/stompjs (the browsers' STOMP client) under Node, with the `ws` package as
// its WebSocket, against the embedded broker.  Run by tests/test_stompjs_interop.py:
//
//     node roundtrip.mjs <ws-url> <stomp-version> <inbox-queue> <count> <outbox-queue>
//
// Connects offering only <stomp-version> (so only its subprotocol), consumes and
// acknowledges <count> messages the test left in <inbox-queue>, publishes a text and
// a binary message to <outbox-queue> (each confirmed by a RECEIPT), disconnects, and
// prints one JSON line: what was negotiated and what was received.
import { Client, Versions } from "@stomp/stompjs";
import { WebSocket } from "ws";

const [url, version, inbox, countText, outbox] = process.argv.slice(2);
const count = Number(countText);
const deadline = setTimeout(() => fail(new Error("timed out")), 20000);

function fail(error) {
  process.stderr.write(`roundtrip.mjs: ${error.stack || error}\n`);
  process.exit(1);
}

function receipt(client, id) {
  return new Promise((resolve) => client.watchForReceipt(id, resolve));
}

const client = new Client({
  brokerURL: url,
  // Node 20 has no global WebSocket: stompjs gets the `ws` one, with the subprotocols
  // of the versions offered (v10.stomp, v11.stomp, v12.stomp).
  webSocketFactory: () => new WebSocket(url, client.stompVersions.protocolVersions()),
  stompVersions: new Versions([version]),
  connectHeaders: { login: "guest", passcode: "guest", host: "/" },
  heartbeatIncoming: 0,
  heartbeatOutgoing: 0,
  reconnectDelay: 0,
  onStompError: (frame) => fail(new Error(`ERROR frame: ${frame.headers.message} ${frame.body}`)),
  onWebSocketError: (event) => fail(new Error(`WebSocket error: ${event.message || event}`)),
});

client.onConnect = async (connected) => {
  try {
    const received = [];
    let done;
    const all = new Promise((resolve) => (done = resolve));
    const ack = version === "1.0" ? "client" : "client-individual";
    client.subscribe(
      inbox,
      (message) => {
        received.push({
          hex: Buffer.from(message.binaryBody).toString("hex"),
          headers: message.headers,
        });
        message.ack();
        if (received.length === count) done();
      },
      { ack },
    );
    await all;

    const textReceipt = receipt(client, "r-text");
    client.publish({
      destination: outbox,
      body: "h\u00e9llo from stompjs",
      headers: { receipt: "r-text", "x-origin": "stompjs" },
    });
    await textReceipt;
    const binaryReceipt = receipt(client, "r-binary");
    client.publish({
      destination: outbox,
      binaryBody: new Uint8Array([0, 1, 2, 255, 254, 0]),
      headers: { receipt: "r-binary", "content-type": "application/octet-stream" },
    });
    await binaryReceipt;

    const result = {
      // STOMP 1.0's CONNECTED has no version header.
      version: connected.headers.version ?? null,
      subprotocol: client.webSocket.protocol,
      received,
    };
    await client.deactivate();
    clearTimeout(deadline);
    process.stdout.write(JSON.stringify(result) + "\n");
  } catch (error) {
    fail(error);
  }
};

client.activate();
