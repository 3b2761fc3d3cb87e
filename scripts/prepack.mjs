// `prepack`: refuses a plain `npm pack` (or `npm publish`) of the repository while package.json
// does not list the platform packages in its optionalDependencies: such a tarball installs, then
// cannot load its native addon. `npm run pack` writes the installable tarballs into pack/;
// publishing writes the optionalDependencies first (`napi prepublish`, the prepublishOnly script).
//
// npm also runs `prepack` as the pre-hook of the `pack` script, before `npm run pack` (npm_command
// `run`, or `run-script` for older npm): that is the way this guard recommends, so it goes through.
import { manifest, optionalDependencies } from './packaging.mjs';

if (['run', 'run-script'].includes(process.env.npm_command)) process.exit(0);

const pkg = manifest();
const missing = Object.keys(optionalDependencies(pkg)).filter((name) => pkg.optionalDependencies?.[name] !== pkg.version);
if (missing.length > 0) {
  console.error(
    `npm pack: this package.json does not list ${missing.join(', ')} in its optionalDependencies, so the tarball ` +
      `would install without its native addon. Run \`npm run pack\`: it writes the installable tarballs into pack/.`,
  );
  process.exit(1);
}
