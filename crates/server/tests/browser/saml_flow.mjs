// SAML single sign-on in Debian's headless Chromium: opens an authorization URL, checks the
// organization's branding on the hosted login page, types a work email and chooses "Continue
// with SSO", signs in on the test identity provider's page (pysaml2), whose form posts the
// signed response back, and reports the redirect URI the browser lands on with its code.
// Saves a screenshot of the branded login page.
//
//   node saml_flow.mjs AUTHORIZE_URL CALLBACK_PREFIX EMAIL EXPECTED_TITLE IDP_URL SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { chromium } from "playwright-core";

const [authorizeUrl, callbackPrefix, email, expectedTitle, idpUrl, screenshot] =
  process.argv.slice(2);
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  // A busy CI machine runs many browsers and Argon2 hashes at once: wait a minute, not 30 s.
  page.setDefaultTimeout(60000);
  await page.goto(authorizeUrl);
  const heading = await page.locator("h1").innerText();
  if (heading !== expectedTitle) throw new Error(`heading ${JSON.stringify(heading)}`);
  const sso = page.getByRole("button", { name: "Continue with SSO" });
  const ssoColor = await sso.evaluate((b) => getComputedStyle(b).backgroundColor);
  await page.locator("#email").fill(email);
  await page.screenshot({ path: screenshot, fullPage: true });

  // To the identity provider, with the AuthnRequest.
  await Promise.all([page.waitForURL((url) => url.href.startsWith(idpUrl)), sso.click()]);
  const idpPage = page.url();
  await page.locator("#email").fill(email);
  // The IdP's sign-in answers with a page that posts the signed response to the assertion
  // consumer; the client's redirect URI has no server behind it: the request to it is the end.
  const landing = page.waitForEvent("request", {
    predicate: (request) => request.url().startsWith(callbackPrefix),
    timeout: 60000,
  });
  await page.getByRole("button", { name: "Sign in" }).click();
  const callback = (await landing).url();

  console.log(JSON.stringify({ heading, ssoColor, idpPage, callback }));
} finally {
  await browser.close();
}
