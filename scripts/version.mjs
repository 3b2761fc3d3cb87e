// Keeps the platform packages (npm/<platform>/package.json) in step with the main package: the
// same version and engines. `npm version <new>` runs it (package.json's `version` script) after
// changing package.json, then stages npm/; the main package's optionalDependencies are written
// from the same version when it is packed (npm run pack) or published (napi prepublish).
// `--check` changes nothing and fails when something is out of step.
import { syncVersions, versionProblems } from './packaging.mjs';

if (process.argv.includes('--check')) {
  const problems = versionProblems();
  for (const problem of problems) console.error(problem);
  process.exit(problems.length === 0 ? 0 : 1);
}
syncVersions();
const problems = versionProblems();
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log('npm/*/package.json: in step with package.json. Rebuild (npm run build:debug) to regenerate binding.js, which checks the version.');
