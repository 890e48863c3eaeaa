// Follows an invitation as the invitee does: finds the newest mail to EMAIL in the server's mail
// directory, opens its link in Debian's headless Chromium at a phone's size, checks the page
// (heading, labels, the organization's color), fills the form by keyboard (a name and a new
// password to register, or the password of the existing account) and reports where it landed.
// Saves a screenshot of the invitation page.
//
//   node invitation_flow.mjs MAIL_DIR EMAIL register|sign-in FULL_NAME PASSWORD SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [mailDir, email, mode, fullName, password, screenshot] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

// The newest .eml to the address with an invitation link; quoted-printable soft breaks joined.
const mails = readdirSync(mailDir)
  .filter((name) => name.endsWith(".eml"))
  .sort()
  .map((name) => readFileSync(join(mailDir, name), "utf8").replace(/=\r?\n/g, "").replace(/=3D/g, "="))
  .filter((mail) => mail.includes(email) && mail.includes("/invitations/"));
if (mails.length === 0) throw new Error(`no invitation mail to ${email} in ${mailDir}`);
const link = mails[mails.length - 1].match(/https?:\/\/[^\s"<>]+\/invitations\/[A-Za-z0-9_-]+/)?.[0];
if (!link) throw new Error("the mail has no invitation link");

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
try {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  // A busy CI machine runs many browsers and Argon2 hashes at once: wait a minute, not 30 s.
  page.setDefaultTimeout(60000);
  const opened = await page.goto(link);
  const heading = await page.locator("h1").innerText();
  const summary = await page.locator("p.subtitle").innerText();
  const lang = await page.evaluate(() => document.documentElement.lang);
  // Every field the invitee sees has a label that names it.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input:not([type=hidden])")]
      .filter((input) => input.labels.length === 0)
      .map((input) => input.id || input.name),
  );
  const labels = await page.locator("label").allInnerTexts();
  const shownEmail = await page.locator("#email").inputValue();
  const button = page.locator('button[type="submit"]');
  const buttonText = await button.innerText();
  const buttonColor = await button.evaluate((b) => getComputedStyle(b).backgroundColor);
  await page.screenshot({ path: screenshot, fullPage: true });

  // By keyboard: the first field, Tab to the password, Enter to submit.
  if (mode === "register") {
    await page.locator("#full_name").focus();
    await page.keyboard.type(fullName);
    await page.keyboard.press("Tab");
  } else {
    await page.locator("#password").focus();
  }
  const focused = await page.evaluate(() => document.activeElement?.id);
  if (focused !== "password") throw new Error(`the password field is not where Tab goes: ${focused}`);
  await page.keyboard.type(password);
  const [answer] = await Promise.all([
    page.waitForNavigation({ timeout: 60000 }),
    page.keyboard.press("Enter"),
  ]);
  const landedHeading = await page.locator("h1").innerText();
  const landedText = await page.locator("p").first().innerText();
  const cookies = await context.cookies();
  const session = cookies.some((cookie) => cookie.name === "gatehouse_session" && cookie.value !== "");

  // The link again: it is spent now, and says so.
  const again = await page.goto(link);
  const againHeading = await page.locator("h1").innerText();

  console.log(
    JSON.stringify({
      link,
      openedStatus: opened.status(),
      heading,
      summary,
      lang,
      unlabelled,
      labels,
      shownEmail,
      buttonText,
      buttonColor,
      focused,
      landedStatus: answer?.status(),
      landedHeading,
      landedText,
      session,
      againStatus: again.status(),
      againHeading,
    }),
  );
} finally {
  await browser.close();
}
