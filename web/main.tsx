/** Entry of the portal bundle (controller/portal/build.ts). */
import { render } from 'preact';
import { App } from './app.tsx';
import { initialLang, setLang, type Lang } from './i18n/index.ts';
import './styles.css';

function start(languageFailed?: Lang) {
  render(<App languageFailed={languageFailed} />, document.getElementById('app')!);
  // Read by the first-load benchmark (scripts/bench-portal.ts): the login form is in the document.
  performance.mark('peerops:rendered');
}

// A reader of another language than English sees the first render in it, never English first: its
// words are fetched before (web/i18n/index.ts). When they cannot be, the page is English and says so.
const chosen = initialLang();
setLang(chosen).then(
  () => start(),
  () => start(chosen),
);
