// The npm packages of harness-sessions, as napi-rs lays them out: the main package (the
// JavaScript, the types, `testing/`) and one package per platform under npm/<platform>/ holding
// the native addon, which the main package lists in its `optionalDependencies` (written when it is
// packed or published, as `napi prepublish` does) so that npm installs only the one that fits.
//
// Used by `npm run pack`, `npm run demo`, `npm version` (scripts/version.mjs) and the package tests.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cache, root, run, TARGET } from './lib.mjs';

/** The package's manifest. */
export function manifest() {
  return JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
}

/**
 * The platform napi-rs names a Rust target triple after, which is also its folder under npm/ and
 * the suffix of its package: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`, `aarch64-apple-darwin`
 * → `darwin-arm64`, `x86_64-pc-windows-msvc` → `win32-x64-msvc`.
 */
export function platformOf(triple) {
  const [arch, , system, abi] = triple.split('-');
  const cpu = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32' }[arch];
  const os = { linux: 'linux', darwin: 'darwin', windows: 'win32' }[system];
  if (cpu === undefined || os === undefined) throw new Error(`no napi-rs platform for the target ${triple}`);
  return [os, cpu, os === 'darwin' ? undefined : abi].filter(Boolean).join('-');
}

/** The platform packages of `napi.targets`: `{ triple, platform, name, dir }`. */
export function platformPackages(pkg = manifest()) {
  return pkg.napi.targets.map((triple) => {
    const platform = platformOf(triple);
    return { triple, platform, name: `${pkg.name}-${platform}`, dir: join(root, 'npm', platform) };
  });
}

/** The `optionalDependencies` the published main package has: every platform package, at its version. */
export function optionalDependencies(pkg = manifest()) {
  return Object.fromEntries(platformPackages(pkg).map(({ name }) => [name, pkg.version]));
}

/**
 * What is out of step between package.json and the npm/ folders: a target without its folder, a
 * folder without its target, a platform package whose name or version is not the main one's, the
 * example depending on tarballs of another version.
 */
export function versionProblems(pkg = manifest()) {
  const problems = [];
  const packages = platformPackages(pkg);
  const folders = existsSync(join(root, 'npm')) ? readdirSync(join(root, 'npm')) : [];
  for (const folder of folders) {
    if (!packages.some(({ platform }) => platform === folder)) problems.push(`npm/${folder} is no target of package.json's napi.targets`);
  }
  for (const { platform, name, dir } of packages) {
    const file = join(dir, 'package.json');
    if (!existsSync(file)) {
      problems.push(`npm/${platform}/package.json is missing (napi create-npm-dirs makes it)`);
      continue;
    }
    const platformPkg = JSON.parse(readFileSync(file, 'utf8'));
    if (platformPkg.name !== name) problems.push(`npm/${platform} is named ${platformPkg.name}, not ${name}`);
    if (platformPkg.version !== pkg.version) problems.push(`npm/${platform} is at ${platformPkg.version}, not ${pkg.version}`);
  }
  const example = JSON.parse(readFileSync(examplePackage, 'utf8'));
  for (const [field, specs] of Object.entries(exampleTarballSpecs(pkg.version))) {
    for (const [name, spec] of Object.entries(specs)) {
      if (example[field]?.[name] !== spec) problems.push(`examples/next-chat/package.json: ${field}.${name} is not ${spec}`);
    }
  }
  return problems;
}

/** The example app, which installs the packed tarballs as its dependencies. */
const examplePackage = join(root, 'examples', 'next-chat', 'package.json');

/** The example's dependencies on the tarballs of version `version`, as its package.json has them. */
export function exampleTarballSpecs(version) {
  return {
    dependencies: { 'harness-sessions': `file:../../pack/harness-sessions-${version}.tgz` },
    optionalDependencies: { 'harness-sessions-linux-x64-gnu': `file:../../pack/harness-sessions-linux-x64-gnu-${version}.tgz` },
  };
}

/**
 * Sets every platform package's version to the main package's, and the example's dependencies to
 * the tarballs of that version. (Their engines differ on purpose: the addon loads on Node 20, and
 * npm skips an optional dependency whose engines do not fit; the main package asks for Node 22, as
 * its peers `ai` and `@ai-sdk/harness` do.)
 */
export function syncVersions(pkg = manifest()) {
  for (const { dir } of platformPackages(pkg)) {
    const file = join(dir, 'package.json');
    const platformPkg = JSON.parse(readFileSync(file, 'utf8'));
    platformPkg.version = pkg.version;
    writeFileSync(file, `${JSON.stringify(platformPkg, null, 2)}\n`);
  }
  const example = JSON.parse(readFileSync(examplePackage, 'utf8'));
  for (const [field, specs] of Object.entries(exampleTarballSpecs(pkg.version))) Object.assign(example[field], specs);
  writeFileSync(examplePackage, `${JSON.stringify(example, null, 2)}\n`);
}

/**
 * A digest of the contents of `paths` (files, or folders walked in order), their names relative to
 * `base` included; entries named in `skip` are left out wherever they are.
 */
export function digestOf(paths, { base = root, skip = new Set() } = {}) {
  const hash = createHash('sha256');
  const add = (path) => {
    if (!existsSync(path)) return;
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) if (!skip.has(entry)) add(join(path, entry));
    } else {
      hash.update(path.slice(base.length)).update('\0').update(readFileSync(path)).update('\0');
    }
  };
  for (const path of paths) add(path);
  return hash.digest('hex');
}

/** A digest of what the addon is built from: the Rust sources, the manifests, the build script. */
function sourceDigest() {
  return digestOf(['src', 'Cargo.toml', 'Cargo.lock', 'build.rs'].map((path) => join(root, path)));
}

/** Where the release addon is kept between runs, with the digest of the sources it was built from. */
export const releaseDir = join(cache, 'release');

/**
 * The release build of the addon for this machine's platform (`.cache/release/`), built only when
 * the Rust sources changed since the last one (or, with `keep`, only when there is none): the
 * tests' debug build (the `.node` file at the root) is never used for it. Returns the path of the
 * `.node` file.
 */
export function releaseAddon({ keep = false } = {}) {
  return builtAddon({ profile: 'release', keep });
}

/**
 * The addon of `profile` (`release`, or `dev`: the profile of `npm run build:debug` and the tests)
 * for this machine's platform, kept in `.cache/<profile>/` with the digest of the sources it was
 * built from, and built again only when they changed (or, with `keep`, only when there is none).
 *
 * It is built with the very flags of `npm run build` (or `build:debug`), so that Cargo finds what
 * they compiled (a copied `target/` included) and compiles nothing again: napi's `--strip` would
 * add to RUSTFLAGS, and a change of RUSTFLAGS rebuilds every crate. The release addon is stripped
 * afterwards, with binutils' `strip` when the machine has it.
 */
export function builtAddon({ profile = 'release', keep = false } = {}) {
  const platform = platformOf(TARGET);
  const dir = join(cache, profile);
  const addon = join(dir, `${manifest().napi.binaryName}.${platform}.node`);
  if (keep && existsSync(addon)) return addon;
  const stamp = join(dir, 'sources.sha256');
  const digest = sourceDigest();
  if (existsSync(addon) && existsSync(stamp) && readFileSync(stamp, 'utf8') === digest) return addon;
  mkdirSync(dir, { recursive: true });
  rmSync(stamp, { force: true });
  // --no-js, and the types into the cache: the committed binding.js and binding.d.ts stay as they are.
  const release = profile === 'release' ? ['--release'] : [];
  run('npx', ['napi', 'build', '--platform', ...release, '--target', TARGET, '--output-dir', dir, '--no-js', '--dts', 'binding.d.ts']);
  if (profile === 'release' && spawnSync('strip', ['--strip-unneeded', addon], { stdio: 'ignore' }).error !== undefined) {
    console.log('(no `strip` on this machine: the addon is packed with its symbols)');
  }
  writeFileSync(stamp, digest);
  return addon;
}

/** `npm pack` of the folder `dir` into `destination`: the path of the tarball. */
function npmPack(dir, destination) {
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const [{ filename }] = JSON.parse(out);
  return join(destination, filename);
}

/**
 * Writes the installable tarballs into `destination` (default `pack/`): the main package, with its
 * `optionalDependencies`, and the package of this machine's platform with the addon of `profile`
 * (the release one, unless the caller asks for `dev`, as `npm run demo` does). Returns `{ main, platform }`, their paths.
 */
export function packTarballs(destination = join(root, 'pack'), { keepAddon = false, profile = 'release' } = {}) {
  const pkg = manifest();
  const problems = versionProblems(pkg);
  if (problems.length > 0) throw new Error(`the packages are out of step (node scripts/version.mjs fixes it):\n${problems.join('\n')}`);
  const addon = builtAddon({ profile, keep: keepAddon });
  mkdirSync(destination, { recursive: true });
  const staging = join(cache, 'staging');
  rmSync(staging, { recursive: true, force: true });

  // The platform package: its folder under npm/ and the addon (what `napi artifacts` does).
  const own = platformPackages(pkg).find(({ triple }) => triple === TARGET);
  const platformDir = join(staging, own.platform);
  cpSync(own.dir, platformDir, { recursive: true });
  copyFileSync(addon, join(platformDir, `${pkg.napi.binaryName}.${own.platform}.node`));

  // The main package: its files, and its manifest with the optionalDependencies `napi prepublish`
  // would write; no scripts (they are the repository's).
  const mainDir = join(staging, 'main');
  mkdirSync(mainDir, { recursive: true });
  for (const entry of [...pkg.files, 'README.md', 'LICENSE']) {
    if (existsSync(join(root, entry))) cpSync(join(root, entry), join(mainDir, entry), { recursive: true });
  }
  const { scripts, ...published } = pkg;
  published.optionalDependencies = optionalDependencies(pkg);
  writeFileSync(join(mainDir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);

  const platform = npmPack(platformDir, destination);
  const main = npmPack(mainDir, destination);
  return { main, platform };
}
