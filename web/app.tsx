/** The portal's shell: header with the network's ASN, language and login; pages by the URL's hash. */
import { useEffect, useState } from 'preact/hooks';
import { api, setToken, type Login, type PublicRouter } from './api.ts';
import { initialLang, lang, LANGS, setLang, t, type Lang, type MessageKey } from './i18n/index.ts';
import { PolicyPage, ReviewsPage, RoutersPage } from './pages/admin.tsx';
import { AdminSessionsPage } from './pages/admin-sessions.tsx';
import { CreatePage } from './pages/create.tsx';
import { LoginPage } from './pages/login.tsx';
import { ReviewPage } from './pages/review.tsx';
import { SessionsPage } from './pages/sessions.tsx';

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

const PAGES: { hash: string; title: MessageKey; admin?: boolean }[] = [
  { hash: '#/', title: 'nav.sessions' },
  { hash: '#/new', title: 'nav.create' },
  { hash: '#/admin/sessions', title: 'nav.table', admin: true },
  { hash: '#/admin/reviews', title: 'nav.reviews', admin: true },
  { hash: '#/admin/routers', title: 'nav.routers', admin: true },
  { hash: '#/admin/policy', title: 'nav.policy', admin: true },
];

export function App() {
  const [language, setLanguage] = useState<Lang>(() => {
    const l = initialLang();
    setLang(l);
    return l;
  });
  const [login, setLogin] = useState<Login>();
  const [expired, setExpired] = useState(false);
  const [routers, setRouters] = useState<PublicRouter[]>();
  const hash = useHash();

  useEffect(() => {
    api
      .routers()
      .then((r) => setRouters(r.routers))
      .catch(() => setRouters([]));
  }, []);

  const logIn = (l: Login) => {
    setToken(l.token, () => {
      setToken(undefined);
      setLogin(undefined);
      setExpired(true);
    });
    setExpired(false);
    setLogin(l);
  };
  const logOut = () => {
    // the token is revoked, not only forgotten here; the request carries it before it is cleared below,
    // and a failure (expired already, controller unreachable) leaves nothing to do
    api.logout().catch(() => undefined);
    setToken(undefined);
    setLogin(undefined);
    location.hash = '#/';
  };
  const changeLang = (l: Lang) => {
    setLang(l);
    setLanguage(l);
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

  return (
    <div class="shell" key={language}>
      <a class="skip" href="#main">
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
                  <a href={p.hash} aria-current={p === page ? 'page' : undefined}>
                    {t(p.title)}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        )}
      </header>
      <main id="main">
        {expired && (
          <p class="problem" role="alert">
            {t('login.expired')}
          </p>
        )}
        {!login ? (
          <LoginPage onLogin={logIn} />
        ) : page.hash === '#/new' ? (
          <CreatePage routers={routers} networkAsn={networkAsn} />
        ) : reviewing ? (
          <ReviewPage key={reviewing} uuid={reviewing} />
        ) : page.hash === '#/admin/sessions' ? (
          <AdminSessionsPage />
        ) : page.hash === '#/admin/reviews' ? (
          <ReviewsPage />
        ) : page.hash === '#/admin/routers' ? (
          <RoutersPage />
        ) : page.hash === '#/admin/policy' ? (
          <PolicyPage />
        ) : (
          <SessionsPage networkAsn={networkAsn} admin={isAdmin} />
        )}
      </main>
      <footer>
        <p>{t('footer.text')}</p>
      </footer>
    </div>
  );
}
