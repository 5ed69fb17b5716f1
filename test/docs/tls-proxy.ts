/**
 * The reverse proxy with TLS the README puts in front of the controller (`https://peering.example.net`
 * → `127.0.0.1:8080`), for the doc blocks' namespace: `node tls-proxy.ts KEY CERT`, on 127.0.0.1:443.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:https';

const [keyFile, certFile] = process.argv.slice(2);
if (!keyFile || !certFile) throw new Error('usage: tls-proxy.ts KEY CERT');

createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
  const upstream = request(
    { host: '127.0.0.1', port: 8080, method: req.method, path: req.url, headers: req.headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.once('error', () => res.writeHead(502).end());
  req.pipe(upstream);
}).listen(443, '127.0.0.1', () => console.log('tls-proxy: https://127.0.0.1:443 → http://127.0.0.1:8080'));
