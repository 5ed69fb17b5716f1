/**
 * Builds the web portal (web/) into the files the controller serves: one JS and one CSS file named by
 * their content hash (cached for a year: a new build has new names) and index.html, which names them.
 * Used by `npm run build:web` (scripts/build-web.ts, writes dist/portal/), by the release builds
 * (scripts/build-release.ts, which bake the files into the bundle) and by the controller itself when
 * it runs from the source tree (controller/portal/assets.ts), so a fresh clone serves the portal
 * without a build step.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { build } from 'esbuild';
import type { PortalFile } from './assets.ts';

const WEB = path.resolve(import.meta.dirname, '..', '..', 'web');

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
};

/**
 * The portal's files: `index.html` first, then `assets/app-<hash>.js` and `.css`, then the scripts the
 * page imports when it needs them: each language but English (`assets/zh-CN-<hash>.js`,
 * web/i18n/index.ts), and any chunk they share with the page.
 */
export async function buildPortal(): Promise<PortalFile[]> {
  // each language's file is an entry of its own, so its asset is named by it: `zh-CN-<hash>.js`
  const languages = (await readdir(path.join(WEB, 'i18n', 'languages'))).map((file) => ({
    in: `i18n/languages/${file}`,
    out: path.basename(file, '.ts'),
  }));
  const result = await build({
    // the metafile's paths are relative to web/
    absWorkingDir: WEB,
    entryPoints: [{ in: 'main.tsx', out: 'app' }, ...languages],
    bundle: true,
    write: false,
    minify: true,
    format: 'esm',
    // a dynamic import() becomes an asset of its own, fetched from this origin (script-src 'self')
    splitting: true,
    metafile: true,
    // Browsers of the last few years, by their versions alone (an `es20xx` floor would lower class
    // fields into a helper shared between the assets); nothing is polyfilled.
    target: ['chrome100', 'firefox100', 'safari15'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    outdir: path.join(WEB, 'out'),
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    charset: 'utf8',
    legalComments: 'none',
    logLevel: 'warning',
  });
  const assets = result.outputFiles.map((f) => {
    const name = path.basename(f.path);
    return {
      path: `assets/${name}`,
      contentType: CONTENT_TYPES[path.extname(name)] ?? 'application/octet-stream',
      body: Buffer.from(f.contents).toString('utf8'),
    };
  });
  const main = Object.entries(result.metafile.outputs).find(([, o]) => o.entryPoint === 'main.tsx');
  const js = assets.find((a) => main && a.path === `assets/${path.basename(main[0])}`);
  const css = assets.find((a) => main && a.path === `assets/${path.basename(main[1].cssBundle ?? '')}`);
  if (!js || !css) throw new Error("portal build: expected the page's .js and .css among the outputs");
  return [
    { path: 'index.html', contentType: CONTENT_TYPES['.html']!, body: indexHtml(js.path, css.path) },
    js,
    css,
    ...assets.filter((a) => a !== js && a !== css),
  ];
}

/** The page: no inline script or style (the Content-Security-Policy allows neither). */
function indexHtml(js: string, css: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>peerops</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/${css}">
<script type="module" src="/${js}"></script>
</head>
<body>
<div id="app"></div>
<noscript>This portal needs JavaScript; the same actions are in the peerops CLI and the REST API.</noscript>
</body>
</html>
`;
}
