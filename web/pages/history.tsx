/**
 * A session's history (GET /session/:uuid/history, docs/user-guide.md, History): RTT, traffic and routes
 * over 24 h, 7 d or 30 d as small SVG graphs drawn here (no chart library), each an image with a text
 * summary for screen readers, and the same points as a table.
 */
import { useEffect, useState } from 'preact/hooks';
import type { HistoryPoint, HistoryRangeName, SessionHistoryResponse } from '../../common/history.ts';
import { api, type SessionRecord } from '../api.ts';
import { Problem } from '../components.tsx';
import { bytes, count, dateTime, rtt } from '../format.ts';
import { t } from '../i18n/index.ts';

const RANGES: HistoryRangeName[] = ['24h', '7d', '30d'];
const WIDTH = 600;
const HEIGHT = 90;
/** The graph's margins: the scale is written beside it in HTML. */
const LEFT = 0;
const BOTTOM = 4;

interface Series {
  label: string;
  /** A CSS class: the line's colour and dash (styles.css), never the colour alone. */
  className: string;
  value: (p: HistoryPoint) => number | null;
}

/** One graph: a line per series, broken where a span had no report or the series no value. */
function Graph(props: {
  id: string;
  title: string;
  points: HistoryPoint[];
  stepSeconds: number;
  series: Series[];
  format: (n: number) => string;
}) {
  const { points, series } = props;
  const times = points.map((p) => Date.parse(p.at));
  const values = points.flatMap((p) => series.map((s) => s.value(p))).filter((v) => v !== null);
  const max = Math.max(1, ...values);
  const first = times[0] ?? 0;
  const last = times.at(-1) ?? first + 1;
  const x = (time: number) => LEFT + ((time - first) / Math.max(1, last - first)) * (WIDTH - LEFT - 4);
  const y = (v: number) => 4 + (1 - v / max) * (HEIGHT - BOTTOM - 8);
  const path = (s: Series) => {
    let d = '';
    let previous: number | undefined;
    points.forEach((p, i) => {
      const v = s.value(p);
      const time = times[i] ?? 0;
      if (v === null) {
        previous = undefined;
        return;
      }
      // a gap of more than two spans is no line: nothing was reported there
      const joined = previous !== undefined && time - previous <= 2 * props.stepSeconds * 1000;
      d += `${joined ? 'L' : 'M'}${x(time).toFixed(1)},${y(v).toFixed(1)}`;
      previous = time;
    });
    return d;
  };
  const summary = series
    .map((s) => {
      const known = points.map(s.value).filter((v) => v !== null);
      if (known.length === 0) return t('history.noValues', { series: s.label });
      return t('history.summary', {
        series: s.label,
        min: props.format(Math.min(...known)),
        max: props.format(Math.max(...known)),
        last: props.format(known.at(-1) ?? 0),
      });
    })
    .join(' ');
  return (
    <figure class="history-graph">
      <figcaption id={`${props.id}-title`}>
        {props.title}
        {series.length > 1 && (
          <span class="legend">
            {series.map((s) => (
              <span key={s.className} class={`key ${s.className}`}>
                {s.label}
              </span>
            ))}
          </span>
        )}
      </figcaption>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={`${props.id}-title ${props.id}-desc`}
      >
        <desc id={`${props.id}-desc`}>{summary}</desc>
        <line class="axis" x1={LEFT} y1={HEIGHT - BOTTOM} x2={WIDTH} y2={HEIGHT - BOTTOM} />
        <line class="axis" x1={LEFT} y1={4} x2={WIDTH} y2={4} />
        {series.map((s) => (
          <path key={s.className} class={`line ${s.className}`} d={path(s)} />
        ))}
      </svg>
      {/* the scale as text beside the image, readable at any width (the SVG scales with the page) */}
      <div class="ticks" aria-hidden="true">
        <span>{dateTime(points[0]?.at)}</span>
        <span>{t('history.top', { value: props.format(max) })}</span>
        <span>{dateTime(points.at(-1)?.at)}</span>
      </div>
    </figure>
  );
}

export function HistoryPanel(props: { session: SessionRecord }) {
  const s = props.session;
  const [range, setRange] = useState<HistoryRangeName>('24h');
  const [answer, setAnswer] = useState<SessionHistoryResponse>();
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    let current = true;
    setAnswer(undefined);
    setError(undefined);
    api.history(s.uuid, range).then(
      (a) => current && setAnswer(a),
      (err: unknown) => current && setError(err),
    );
    return () => {
      current = false;
    };
  }, [s.uuid, range]);
  const id = `history-${s.uuid}`;
  const points = answer?.points ?? [];
  const step = answer?.stepSeconds ?? 60;
  return (
    <section class="history" aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{t('history.title')}</h3>
      <div class="buttons" role="group" aria-label={t('history.range')}>
        {RANGES.map((r) => (
          <button
            key={r}
            type="button"
            class="secondary"
            aria-pressed={range === r}
            onClick={() => setRange(r)}
          >
            {t(`history.range.${r}`)}
          </button>
        ))}
      </div>
      <Problem error={error} />
      {!answer && !error && <p>{t('common.loading')}</p>}
      {answer && points.length === 0 && <p>{t('history.none')}</p>}
      {points.length > 0 && (
        <>
          <Graph
            id={`${id}-rtt`}
            title={t('history.rtt')}
            points={points}
            stepSeconds={step}
            series={[{ label: t('history.rtt'), className: 'rtt', value: (p) => p.rtt }]}
            format={rtt}
          />
          <Graph
            id={`${id}-traffic`}
            title={t('history.traffic', { minutes: step / 60 })}
            points={points}
            stepSeconds={step}
            series={[
              { label: t('history.received'), className: 'rx', value: (p) => p.rxBytes },
              { label: t('history.sent'), className: 'tx', value: (p) => p.txBytes },
            ]}
            format={bytes}
          />
          <Graph
            id={`${id}-routes`}
            title={t('history.routes')}
            points={points}
            stepSeconds={step}
            series={[
              { label: t('history.imported'), className: 'rx', value: (p) => p.routesImported },
              { label: t('history.exported'), className: 'tx', value: (p) => p.routesExported },
            ]}
            format={count}
          />
          <details>
            <summary>{t('history.asTable')}</summary>
            <div class="table-scroll">
              <table>
                <caption class="visually-hidden">{t('history.title')}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t('history.time')}</th>
                    <th scope="col">{t('history.rtt')}</th>
                    <th scope="col">{t('history.received')}</th>
                    <th scope="col">{t('history.sent')}</th>
                    <th scope="col">{t('history.imported')}</th>
                    <th scope="col">{t('history.exported')}</th>
                  </tr>
                </thead>
                <tbody>
                  {points.map((p) => (
                    <tr key={p.at}>
                      <td>{dateTime(p.at)}</td>
                      <td>{rtt(p.rtt)}</td>
                      <td>{bytes(p.rxBytes)}</td>
                      <td>{bytes(p.txBytes)}</td>
                      <td>{count(p.routesImported)}</td>
                      <td>{count(p.routesExported)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
        </>
      )}
    </section>
  );
}
