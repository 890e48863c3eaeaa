// An authorization in Debian's headless Chromium, by keyboard: the hosted login page, the
// second factor the organization requires, and the consent page for the API scopes asked for;
// reports each page's heading, the scopes listed and the redirect URI with its code. Saves a
// screenshot of the consent page.
//
//   node authorize_flow.mjs AUTHORIZE_URL CALLBACK_PREFIX EMAIL PASSWORD TOTP_CODE SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { chromium } from "playwright-core";

const [authorizeUrl, callbackPrefix, email, password, totpCode, screenshot] =
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
  await Promise.all([page.waitForNavigation(), page.keyboard.press("Enter")]);

  const mfaHeading = await page.locator("h1").innerText();
  await page.locator("#code").focus();
  await page.keyboard.type(totpCode);
  await Promise.all([page.waitForNavigation(), page.keyboard.press("Enter")]);

  const consentHeading = await page.locator("h1").innerText();
  const scopes = await page.locator("ul.scopes li").allInnerTexts();
  await page.screenshot({ path: screenshot, fullPage: true });
  // The client's redirect URI has no server behind it: the browser's request to it is the end.
  const landing = page.waitForEvent("request", {
    predicate: (request) => request.url().startsWith(callbackPrefix),
    timeout: 60000,
  });
  await page.getByRole("button", { name: "Allow" }).focus();
  await page.keyboard.press("Enter");
  const callback = (await landing).url();

  console.log(JSON.stringify({ mfaHeading, consentHeading, scopes, callback }));
} finally {
  await browser.close();
}
