// `npm run pack`: the installable tarballs in pack/ (git-ignored): the main package, which lists
// the platform packages in its optionalDependencies, and harness-sessions-linux-x64-gnu with the
// release addon (built when the Rust sources changed, cached in .cache/release). In an empty
// folder, `npm install <path>/pack/*.tgz` gives a package that loads.
import { packTarballs } from './packaging.mjs';

const started = Date.now();
const { main, platform } = packTarballs(process.argv[2]);
console.log(`\nnpm run pack: ${main}\n              ${platform}\n(${((Date.now() - started) / 1000).toFixed(1)} s)`);
