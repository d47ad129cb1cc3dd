import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { html, trustedMarkup } from '../src/pages/html.js';
import { pageCsp, renderPage } from '../src/pages/layout.js';

describe('page markup: every value is escaped unless it is markup', () => {
  test('markup injection through a name, an email or a group is shown as text', () => {
    const name = `<img src=x onerror="alert(1)">'&`;
    const out = html`<p title="${name}">${name}</p><ul>${['<b>ops</b>', 'dev'].map((g) => html`<li>${g}</li>`)}</ul>`.toString();
    assert.equal(
      out,
      '<p title="&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;">&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&#39;&amp;</p><ul><li>&lt;b&gt;ops&lt;/b&gt;</li><li>dev</li></ul>',
    );
  });

  test('nothing, false and true render nothing; numbers render as text; trusted constants pass', () => {
    assert.equal(html`${null}${undefined}${false}${true}${0}${trustedMarkup('<hr>')}`.toString(), '0<hr>');
  });

  test('a page carries its nonce on style and script only, the viewer as text, and the brand accent only when it is a colour', () => {
    const page = renderPage({
      nonce: 'n0nce',
      title: 'Your account',
      main: html`<p>hi</p>`,
      brand: { name: 'Acme <SSO>', accent: 'red;}</style><script>', logo: null },
      viewer: { name: '</strong><script>x()</script>', email: null, subject: 'sub_x', signOutPath: '/.svc/auth/v1/logout' },
      script: 'void 0;',
    });
    assert.match(page, /<style nonce="n0nce">/);
    assert.match(page, /<script nonce="n0nce">void 0;<\/script>/);
    assert.equal(page.match(/<script/g)?.length, 1, 'no script but the page’s own');
    assert.match(page, /Acme &lt;SSO&gt;/);
    assert.match(page, /--accent: #1d4ed8/);
    assert.match(page, /&lt;\/strong&gt;&lt;script&gt;x\(\)&lt;\/script&gt;/);
    assert.equal(
      pageCsp('n', { script: true }),
      "default-src 'none'; style-src 'nonce-n'; script-src 'nonce-n'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    );
  });
});
