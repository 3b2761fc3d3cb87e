// The type check of `npm test`: `tsc -p __test__/types` on a consumer file written against
// index.d.ts and the real `ai` and `@ai-sdk/harness` types, every declaration file checked. An
// error inside node_modules (the upstream packages' own declarations) is shown but does not fail
// the check; one in the package's files or the consumer does.
import { spawnSync } from 'node:child_process';
import { root } from './lib.mjs';

const result = spawnSync('npx', ['tsc', '-p', '__test__/types/tsconfig.json', '--pretty', 'false'], { cwd: root, encoding: 'utf8' });
const lines = `${result.stdout}${result.stderr}`.split('\n').filter((line) => /error TS\d+/.test(line));
const upstream = lines.filter((line) => line.startsWith('node_modules/'));
const ours = lines.filter((line) => !line.startsWith('node_modules/'));
for (const line of upstream) console.log(`upstream (not ours): ${line}`);
for (const line of ours) console.error(line);
if (ours.length > 0 || (result.status !== 0 && lines.length === 0)) {
  console.error(`\nThe type check failed: ${ours.length} error(s) in the package's types or the consumer.`);
  process.exit(1);
}
console.log(`The type check passed (${upstream.length} error(s) inside upstream declarations ignored).`);
