/** Entry of the portal bundle (controller/portal/build.ts). */
import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';

render(<App />, document.getElementById('app')!);
