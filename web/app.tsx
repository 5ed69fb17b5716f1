/** The portal's shell: header with the network's ASN, language and login; pages by the URL's hash. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, csrfToken, onSignInEnded, type Login, type PublicRouter } from './api.ts';
import { focusHeading, Problem } from './components.tsx';
import { lang, LANGS, setLang, t, type Lang, type MessageKey } from './i18n/index.ts';
import { ReviewsPage } from './pages/admin.tsx';
import { NetworkPage } from './pages/network.tsx';
import { AdminSessionsPage } from './pages/admin-sessions.tsx';
import { CreatePage } from './pages/create.tsx';
import { LoginPage } from './pages/login.tsx';
import { PolicyPage } from './pages/policy.tsx';
import { ReviewPage } from './pages/review.tsx';
import { RoutersPage } from './pages/routers.tsx';
import { SessionsPage } from './pages/sessions.tsx';
import { TokensPage } from './pages/tokens.tsx';

const LANG_NAMES: Record<Lang, string> = { en: 'English', 'zh-CN': '简体中文' };

function useHash(): string {
  const [hash, setHash] = useState(location.hash || '#/');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

/** The controller's answer that the sign-in is over (expired, revoked, idle). */
const isEnded = (err: unknown) => err instanceof ApiError && err.code === 'INVALID_TOKEN';

const PAGES: { hash: string; title: MessageKey; admin?: boolean }[] = [
  { hash: '#/', title: 'nav.sessions' },
  { hash: '#/new', title: 'nav.create' },
  { hash: '#/network', title: 'nav.network' },
  { hash: '#/admin/sessions', title: 'nav.table', admin: true },
  { hash: '#/admin/reviews', title: 'nav.reviews', admin: true },
  { hash: '#/admin/routers', title: 'nav.routers', admin: true },
  { hash: '#/admin/policy', title: 'nav.policy', admin: true },
  { hash: '#/admin/tokens', title: 'nav.tokens', admin: true },
];

/** `languageFailed`: the reader's language, whose words could not be fetched for the first render. */
export function App(props: { languageFailed?: Lang | undefined }) {
  // the first render's language is in already (main.tsx)
  const [language, setLanguage] = useState<Lang>(lang);
  const [languageFailed, setLanguageFailed] = useState(props.languageFailed);
  const [login, setLogin] = useState<Login>();
  // a sign-in cookie from before a reload or in another tab is asked about before the login form shows
  const [restoring, setRestoring] = useState(() => csrfToken() !== undefined);
  const [expired, setExpired] = useState(false);
  // why the sign-in could not be checked (rate-limited, unreachable), or a logout failed
  const [problem, setProblem] = useState<unknown>();
  const [logoutProblem, setLogoutProblem] = useState<unknown>();
  const [routers, setRouters] = useState<PublicRouter[]>();
  const [routersError, setRoutersError] = useState<unknown>();
  // a click on the link of the page shown starts it afresh (New session after a create)
  const [visit, setVisit] = useState(0);
  const hash = useHash();

  const loadRouters = () => {
    setRoutersError(undefined);
    api
      .routers()
      .then((r) => setRouters(r.routers))
      .catch(setRoutersError);
  };
  /** Who this browser is signed in as, from its cookie (after a reload, in a new tab). */
  const restore = () => {
    setProblem(undefined);
    if (csrfToken() === undefined) return setRestoring(false);
    setRestoring(true);
    api
      .current()
      .then(setLogin)
      // a refused sign-in (expired, revoked, idle) shows the login form and says so (onSignInEnded)
      .catch((err: unknown) => !isEnded(err) && setProblem(err))
      .finally(() => setRestoring(false));
  };
  const retry = () => {
    restore();
    loadRouters();
  };
  useEffect(() => {
    onSignInEnded(() => {
      setLogin(undefined);
      setExpired(true);
    });
    retry();
  }, []);

  const logIn = (l: Login) => {
    setExpired(false);
    setLogoutProblem(undefined);
    setProblem(undefined);
    setLogin(l);
  };
  const logOut = async () => {
    setLogoutProblem(undefined);
    try {
      // the token is revoked on the server and the cookies cleared (docs/login.md, Revoking tokens)
      await api.logout();
    } catch (err) {
      // an ended sign-in (expired, revoked) is logged out already; anything else is said and kept
      if (!isEnded(err)) {
        setLogoutProblem(err);
        return;
      }
    }
    setLogin(undefined);
    location.hash = '#/';
  };
  // the page changes language once the words are in; until then, and if they cannot be, it stays
  const changeLang = (l: Lang) => {
    setLanguageFailed(undefined);
    setLang(l).then(
      (applied) => applied && setLanguage(l),
      () => setLanguageFailed(l),
    );
  };
  const networkAsn = routers?.find((r) => r.networkAsn)?.networkAsn ?? undefined;
  const isAdmin = login?.role === 'admin';
  // one session's review page: `#/admin/review/<uuid>`, under the table in the navigation
  const reviewing = isAdmin ? /^#\/admin\/review\/([0-9a-f-]{36})$/.exec(hash)?.[1] : undefined;
  const page =
    PAGES.find((p) => p.hash === (reviewing ? '#/admin/sessions' : hash) && (!p.admin || isAdmin)) ??
    PAGES[0]!;
  useEffect(() => {
    document.title = `${login ? t(page.title) : t('login.title')} · peerops`;
  }, [page, login, language]);
  // focus to the new page's heading after each navigation, login and logout, never on the first render
  const rendered = useRef(false);
  useEffect(() => {
    if (restoring) return;
    if (rendered.current) focusHeading();
    rendered.current = true;
  }, [hash, login === undefined, visit, restoring]);

  return (
    <div class="shell" key={language}>
      <a
        class="skip"
        href="#main"
        onClick={(e) => {
          // the hash names pages: following #main would leave this one (and a half-filled form)
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        {t('nav.skip')}
      </a>
      <header class="top">
        <div class="brand">
          <span class="name">peerops</span>
          <span class="network" data-testid="network-asn">
            {networkAsn ? t('header.network', { asn: networkAsn }) : t('header.portal')}
          </span>
        </div>
        <div class="top-right">
          <label class="visually-hidden" for="lang">
            {t('header.language')}
          </label>
          <select id="lang" value={lang()} onChange={(e) => changeLang(e.currentTarget.value as Lang)}>
            {LANGS.map((l) => (
              <option key={l} value={l}>
                {LANG_NAMES[l]}
              </option>
            ))}
          </select>
          {login && (
            <>
              <span class="who">
                AS{login.asn} · {login.role === 'admin' ? t('header.admin') : t('header.peer')}
              </span>
              <button type="button" class="secondary" onClick={logOut}>
                {t('header.logout')}
              </button>
            </>
          )}
        </div>
        {login && (
          <nav aria-label={t('nav.label')}>
            <ul>
              {PAGES.filter((p) => !p.admin || isAdmin).map((p) => (
                <li key={p.hash}>
                  <a
                    href={p.hash}
                    aria-current={p === page ? 'page' : undefined}
                    onClick={() => p === page && setVisit(visit + 1)}
                  >
                    {t(p.title)}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        {languageFailed && (
          <p class="problem" role="alert">
            {t('header.languageFailed', { language: LANG_NAMES[languageFailed] })}
          </p>
        )}
        {expired && (
          <p class="problem" role="alert">
            {t('login.expired')}
          </p>
        )}
        <Problem error={logoutProblem} />
        {problem && (
          <div class="stack">
            <Problem error={problem} />
            <button type="button" class="secondary" onClick={retry}>
              {t('common.retry')}
            </button>
          </div>
        )}
        {restoring ? (
          <p role="status">{t('common.loading')}</p>
        ) : !login ? (
          <LoginPage onLogin={logIn} />
        ) : page.hash === '#/new' ? (
          <CreatePage
            key={visit}
            routers={routers}
            routersError={routersError}
            onRetryRouters={loadRouters}
            networkAsn={networkAsn}
          />
        ) : reviewing ? (
          <ReviewPage key={reviewing} uuid={reviewing} />
        ) : page.hash === '#/network' ? (
          <NetworkPage key={visit} />
        ) : page.hash === '#/admin/sessions' ? (
          <AdminSessionsPage />
        ) : page.hash === '#/admin/reviews' ? (
          <ReviewsPage key={visit} />
        ) : page.hash === '#/admin/routers' ? (
          <RoutersPage key={visit} />
        ) : page.hash === '#/admin/policy' ? (
          <PolicyPage key={visit} />
        ) : page.hash === '#/admin/tokens' ? (
          <TokensPage key={visit} />
        ) : (
          <SessionsPage key={visit} networkAsn={networkAsn} admin={isAdmin} />
        )}
      </main>
      <footer>
        <p>{t('footer.text')}</p>
      </footer>
    </div>
  );
}
