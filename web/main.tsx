/** Entry of the portal bundle (controller/portal/build.ts). */
import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';

render(<App />, document.getElementById('app')!);
// Read by the first-load benchmark (scripts/bench-portal.ts): the login form is in the document.
performance.mark('peerops:rendered');
