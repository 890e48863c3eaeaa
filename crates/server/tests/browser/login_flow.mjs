// Opens an authorization URL in Debian's headless Chromium at a phone's size, checks the
// organization's branding on the hosted login page, signs in by keyboard, and reports the
// redirect URI with its code. Saves a screenshot of the branded page.
//
//   node login_flow.mjs AUTHORIZE_URL CALLBACK_PREFIX EMAIL PASSWORD EXPECTED_TITLE SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { chromium } from "playwright-core";

const [authorizeUrl, callbackPrefix, email, password, expectedTitle, screenshot] =
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
  const emailLabel = await page.locator('label[for="email"]').innerText();
  const passwordLabel = await page.locator('label[for="password"]').innerText();
  const buttonColor = await page
    .getByRole("button", { name: "Sign in" })
    .evaluate((b) => getComputedStyle(b).backgroundColor);
  await page.screenshot({ path: screenshot, fullPage: true });

  // By keyboard: the email field, Tab to the password, Enter to submit.
  await page.locator("#email").focus();
  await page.keyboard.type(email);
  await page.keyboard.press("Tab");
  const focused = await page.evaluate(() => document.activeElement?.id);
  if (focused !== "password") throw new Error(`Tab went to ${focused}`);
  await page.keyboard.type(password);
  // The client's redirect URI has no server behind it: the browser's request to it is the end.
  const landing = page.waitForEvent("request", {
    predicate: (request) => request.url().startsWith(callbackPrefix),
    timeout: 60000,
  });
  await page.keyboard.press("Enter");
  const callback = (await landing).url();

  console.log(
    JSON.stringify({ heading, emailLabel, passwordLabel, buttonColor, focused, callback }),
  );
} finally {
  await browser.close();
}
