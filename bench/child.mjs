// Runs one figure, or one task of a figure, in a process of its own (started with --expose-gc by
// scripts/bench.mjs or by the figure), so that figures do not share a heap, an addon's threads or
// an RSS. Measures nothing itself: the result goes as JSON to the file BENCH_RESULT_FILE names.
//
//   node --expose-gc bench/child.mjs <figure> [--quick]            → run({ quick, log })
//   node --expose-gc bench/child.mjs <figure> --task <name> <json>  → tasks[name](args)
import { writeFileSync } from 'node:fs';

const [name, ...rest] = process.argv.slice(2);
const module = await import(`./${name}.mjs`);
const log = (...args) => console.log(...args);
// The manager does not hold the event loop while a session prepares in the background (after
// create() has answered): a figure waiting for `idle` through subscribe() would see Node exit
// (code 13). A server always has its listening socket; here, a timer stands in for it.
const keepAlive = setInterval(() => {}, 1 << 30);
let result;
const task = rest.indexOf('--task');
if (task >= 0) {
  result = await module.tasks[rest[task + 1]](JSON.parse(rest[task + 2] ?? '{}'), { log });
} else {
  result = await module.run({ quick: rest.includes('--quick'), soakSeconds: Number(process.env.BENCH_SOAK_SECONDS) || undefined, log });
  result.title ??= module.title;
}
clearInterval(keepAlive);
writeFileSync(process.env.BENCH_RESULT_FILE, JSON.stringify(result));
// A manager or a store may keep threads of the addon; the result is written, the figure is over.
process.exit(0);
