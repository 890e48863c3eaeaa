// Single sign-on enforced for a domain, in Debian's headless Chromium: opens an authorization
// URL, types a work email and its password on the hosted login page and presses Enter; the page
// sends the browser to the organization's identity provider (pysaml2) instead of checking the
// password, whose form posts the signed response back; reports the IdP's page and the redirect
// URI the browser lands on with its code. Saves a screenshot of the IdP's page.
//
//   node sso_redirect_flow.mjs AUTHORIZE_URL CALLBACK_PREFIX EMAIL PASSWORD IDP_URL SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { chromium } from "playwright-core";

const [authorizeUrl, callbackPrefix, email, password, idpUrl, screenshot] =
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
  await page.locator("#email").focus();
  await page.keyboard.type(email);
  await page.keyboard.press("Tab");
  await page.keyboard.type(password);
  // Enter signs in: for this address, at the identity provider.
  await Promise.all([
    page.waitForURL((url) => url.href.startsWith(idpUrl)),
    page.keyboard.press("Enter"),
  ]);
  const idpPage = page.url();
  await page.screenshot({ path: screenshot, fullPage: true });
  await page.locator("#email").fill(email);
  const landing = page.waitForEvent("request", {
    predicate: (request) => request.url().startsWith(callbackPrefix),
    timeout: 60000,
  });
  await page.getByRole("button", { name: "Sign in" }).click();
  const callback = (await landing).url();

  console.log(JSON.stringify({ idpPage, callback }));
} finally {
  await browser.close();
}
