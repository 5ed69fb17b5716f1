/**
 * Builds the web portal into dist/portal/ (`npm run build:web`): index.html and the content-hashed
 * script and stylesheet, with their sizes (raw and gzipped). The controller does not need this step:
 * from the source tree it builds the same files in memory, and release builds bake them in
 * (controller/portal/assets.ts). This output is for a look at what is served, and for serving the
 * portal from another web server in front of the controller.
 *
 *   node scripts/build-web.ts [--out dist/portal]
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { buildPortal } from '../controller/portal/build.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

const { values } = parseArgs({ options: { out: { type: 'string', default: 'dist/portal' } } });
const out = path.resolve(ROOT, values.out ?? 'dist/portal');
const files = await buildPortal();
await rm(out, { recursive: true, force: true });
for (const file of files) {
  const target = path.join(out, file.path);
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, file.body);
  const raw = Buffer.byteLength(file.body);
  const gz = gzipSync(file.body, { level: 9 }).length;
  console.log(
    `${path.relative(ROOT, target)}  ${(raw / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzipped`,
  );
}
