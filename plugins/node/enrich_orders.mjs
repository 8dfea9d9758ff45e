#!/usr/bin/env node
// enrich_orders: an example dagger plugin in Node.js (20+, no dependencies).
//
// It speaks JSON-RPC 2.0 on stdin/stdout, one message per line (README, "JSON-RPC plugins"), and logs to
// stderr. For every order (a record with `order_id` and `amount`) it computes
//   amount_cents  the amount in cents (an integer)
//   tier          "large" from `large_amount` on (default 100), else "small"
// and drops the orders below `min_amount` (default: keep all). It answers with the columns of its output
// schema only: input columns are copied, computed ones filled, the others left out (null). With
// `trace: true` it also fills `call_id` ("<pid>-<n>": the n-th process call of this process) and
// `call_size` (the records that call carried), to show how the host chunks the rows.
//
//   post_processors:
//     transformers:
//       - kind: plugin
//         command: [node, ../plugins/node/enrich_orders.mjs]
//         output_schema: "order_id STRING, amount DOUBLE, amount_cents BIGINT, tier STRING"
//         arguments: {min_amount: 10}
//
// Deliberate failures, for the tests: when an order with the given id arrives,
//   --crash-on ID      log a line to stderr and exit with code 3
//   --garbage-on ID    answer a line that is not JSON
//   --fail-on ID       answer a JSON-RPC error (code -32001)
//   --hang-on ID       never answer (the host's timeout fires)
//   --bad-value-on ID  answer `amount_cents: "a lot"` for that order (a value of the wrong kind)

import { createInterface } from "node:readline";

const NAME = "enrich_orders";
const MODES = ["--crash-on", "--garbage-on", "--fail-on", "--hang-on", "--bad-value-on"];

const failures = {}; // mode -> order id
for (let index = 2; index < process.argv.length; index += 2) {
  const [flag, value] = [process.argv[index], process.argv[index + 1]];
  if (!MODES.includes(flag) || value === undefined) {
    console.error(`${NAME}: usage: enrich_orders.mjs [${MODES.map((m) => `${m} ORDER_ID`).join("] [")}]`);
    process.exit(2);
  }
  failures[flag.slice(2)] = value;
}

let settings = null; // from initialize
let calls = 0;

const log = (line) => process.stderr.write(`${NAME}: ${line}\n`);
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
const answer = (id, result) => send({ id, result });
const fail = (id, code, message, data) => send({ id, error: { code, message, ...(data && { data }) } });

class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function initialize(params) {
  if (params.protocol_version !== 1) {
    throw new RpcError(-32602, `${NAME} speaks protocol version 1, not ${params.protocol_version}`);
  }
  const input = new Set(params.input_schema.map((column) => column.name));
  const missing = ["order_id", "amount"].filter((name) => !input.has(name));
  if (missing.length) {
    throw new RpcError(-32602, `${NAME} needs the column(s) ${missing.join(", ")}; got ${[...input].join(", ")}`);
  }
  const args = params.arguments ?? {};
  settings = {
    output: params.output_schema.map((column) => column.name),
    minAmount: args.min_amount ?? -Infinity,
    largeAmount: args.large_amount ?? 100,
    trace: Boolean(args.trace),
  };
  log(`ready for ${params.dagger} ${params.key}: ${settings.output.join(", ")}`);
  return { name: NAME, version: "1.0.0" };
}

function processRecords(params, id) {
  if (settings === null) throw new RpcError(-32002, "process before initialize");
  calls += 1;
  const out = [];
  for (const record of params.records) {
    const orderId = record.order_id;
    if (orderId === failures["crash-on"]) {
      process.stderr.write(`${NAME}: crashing on purpose at order ${orderId}\n`, () => process.exit(3));
      return undefined;
    }
    if (orderId === failures["hang-on"]) {
      log(`hanging on purpose at order ${orderId}`);
      return undefined;
    }
    if (orderId === failures["garbage-on"]) {
      process.stdout.write(`this is not JSON (order ${orderId})\n`);
      return undefined;
    }
    if (orderId === failures["fail-on"]) {
      throw new RpcError(-32001, `cannot enrich order ${orderId}: refused on purpose`);
    }
    const amount = Number(record.amount); // DOUBLE arrives as a number; BIGINT and DECIMAL as strings
    if (record.amount === null || Number.isNaN(amount) || amount < settings.minAmount) continue;
    const computed = {
      amount_cents: orderId === failures["bad-value-on"] ? "a lot" : Math.round(amount * 100),
      tier: amount >= settings.largeAmount ? "large" : "small",
      ...(settings.trace && { call_id: `${process.pid}-${calls}`, call_size: params.records.length }),
    };
    const enriched = {};
    for (const name of settings.output) {
      if (name in computed) enriched[name] = computed[name];
      else if (name in record) enriched[name] = record[name];
    }
    out.push(enriched);
  }
  log(`process #${calls}: ${params.records.length} in, ${out.length} out`);
  answer(id, { records: out });
  return undefined;
}

function handle(line) {
  if (!line.trim()) return;
  let message;
  try {
    message = JSON.parse(line);
  } catch (error) {
    fail(null, -32700, `parse error: ${error.message}`);
    return;
  }
  const { id, method, params } = message;
  const isRequest = id !== undefined && id !== null;
  try {
    if (method === "initialize" && isRequest) answer(id, initialize(params));
    else if (method === "process" && isRequest) processRecords(params, id);
    else if (method === "shutdown") {
      log(`shutting down after ${calls} process call(s)`);
      process.stdin.destroy();
    } else if (isRequest) fail(id, -32601, `method not found: ${method}`);
    // other notifications: ignored, as the protocol asks
  } catch (error) {
    if (!isRequest) return;
    if (error instanceof RpcError) fail(id, error.code, error.message);
    else fail(id, -32603, `${NAME}: ${error.message}`, { stack: error.stack });
  }
}

createInterface({ input: process.stdin, crlfDelay: Infinity }).on("line", handle);
// At the end of stdin (the host closed it, or went away) Node exits once the pending output is written.
