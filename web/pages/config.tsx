/** The peer-side configuration of a session (POST /session `config`): shown, copied, downloaded. */
import { useState } from 'preact/hooks';
import { PEER_CONFIG_FORMATS, type PeerConfigFormat } from '../../common/peer-config/formats.ts';
import { api, type SessionConfigResponse } from '../api.ts';
import { CopyButton, DownloadButton, Problem } from '../components.tsx';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';

export function ConfigPanel(props: { uuid: string }) {
  const [format, setFormat] = useState<PeerConfigFormat>('wg-quick');
  const [answer, setAnswer] = useState<SessionConfigResponse>();
  const { busy: loading, error, run } = useAction();
  const id = `config-${props.uuid}`;
  const show = (f: PeerConfigFormat) => {
    setFormat(f);
    setAnswer(undefined);
    return run(async () => setAnswer(await api.config(props.uuid, f)));
  };
  return (
    <div class="config">
      <div class="inline-form">
        <label for={`${id}-format`}>{t('config.format')}</label>
        <select
          id={`${id}-format`}
          value={format}
          onChange={(e) => setFormat(e.currentTarget.value as PeerConfigFormat)}
        >
          {PEER_CONFIG_FORMATS.map((f) => (
            <option key={f} value={f}>
              {t(`config.format.${f}`)}
            </option>
          ))}
        </select>
        <button type="button" class="secondary" onClick={() => show(format)}>
          {t('config.show')}
        </button>
      </div>
      {loading && (
        <p role="status" data-testid="config-loading">
          {t('common.loading')}
        </p>
      )}
      <p class="hint">{t('config.privateKeyNote')}</p>
      {answer?.files.map((file) => (
        <figure key={file.name} class="config-file">
          <figcaption>
            <code>{file.name}</code>
          </figcaption>
          <pre class="code" tabIndex={0} data-testid="config-content">
            {file.content}
          </pre>
          <div class="buttons">
            <CopyButton text={file.content} />
            <DownloadButton name={file.name} text={file.content} />
          </div>
        </figure>
      ))}
      <Problem error={error} />
    </div>
  );
}
