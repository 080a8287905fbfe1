// The echo script of `stomp-check client --websocket /ws`, for
// @stomp/stompjs under Node (the `ws` package as its WebSocket).  Run by
// stomp-check/tests/test_checker.py:
//
//     node check_echo.mjs <ws-url>
//
// Connects (STOMP 1.2, heart-beats 500 ms both ways), subscribes to /queue/check,
// echoes each message's body and x- headers to /queue/echo with a receipt, connects
// again when the session ends, and exits when CONNECT gets the ERROR
// "check-client done".
import { Client, Versions } from "@stomp/stompjs";
import { WebSocket } from "ws";

const [url] = process.argv.slice(2);
const DONE = "check-client done";
const deadline = setTimeout(() => process.exit(1), 120000);
let echoes = 0;

const client = new Client({
  brokerURL: url,
  webSocketFactory: () => new WebSocket(url, client.stompVersions.protocolVersions()),
  stompVersions: new Versions(["1.2"]),
  connectHeaders: { host: "/" },
  heartbeatIncoming: 500,
  heartbeatOutgoing: 500,
  reconnectDelay: 50,
  debug: (text) => { if (process.env.ECHO_DEBUG) process.stderr.write(text + "\n"); },
  onStompError: (frame) => {
    if (frame.headers.message === DONE) {
      clearTimeout(deadline);
      process.exit(0);
    }
  },
});

client.onConnect = () => {
  client.subscribe("/queue/check", (message) => {
    const headers = { receipt: `echo-${++echoes}` };
    for (const [name, value] of Object.entries(message.headers)) {
      if (name.startsWith("x-")) headers[name] = value;
    }
    client.publish({ destination: "/queue/echo", binaryBody: message.binaryBody, headers });
  });
};

client.activate();
