// A security key as a second factor, in Debian's headless Chromium with its virtual
// authenticator (DevTools protocol: WebAuthn.addVirtualAuthenticator): registers a key through
// the API from a page of the service's origin, then signs in on the hosted login page with the
// password and the key, and reports where the browser lands.
//
//   node webauthn_flow.mjs PUBLIC_URL ACCESS_TOKEN EMAIL PASSWORD SCREENSHOT
//
// Prints one JSON object; exits non-zero on the first thing that is wrong.
import { chromium } from "playwright-core";

const [publicUrl, accessToken, email, password, screenshot] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";

const browser = await chromium.launch({
  executablePath,
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  // A busy CI machine runs many browsers and Argon2 hashes at once: wait a minute, not 30 s.
  page.setDefaultTimeout(60000);
  const devtools = await page.context().newCDPSession(page);
  await devtools.send("WebAuthn.enable");
  await devtools.send("WebAuthn.addVirtualAuthenticator", {
    options: {
      protocol: "ctap2",
      transport: "usb",
      hasResidentKey: false,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });

  // Register through the API from a page of the origin (an API answer: no page policy).
  await page.goto(`${publicUrl}/readyz`);
  const registered = await page.evaluate(async (token) => {
    const headers = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
    const start = await (
      await fetch("/api/v1/auth/mfa/webauthn/register", { method: "POST", headers, body: "{}" })
    ).json();
    const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(start.options.publicKey);
    const credential = (await navigator.credentials.create({ publicKey })).toJSON();
    const done = await fetch(`/api/v1/auth/mfa/webauthn/register/${start.challenge_id}`, {
      method: "POST",
      headers,
      body: JSON.stringify({ credential }),
    });
    return { status: done.status, body: await done.json() };
  }, accessToken);

  // Sign in on the hosted page: password, then the key.
  await page.goto(`${publicUrl}/login?return_to=%2Flogin%2Fdone`);
  await page.locator("#email").fill(email);
  await page.locator("#password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Two-step verification" }).waitFor();
  const secondStep = await page.locator("h1").innerText();
  const key = page.getByRole("button", { name: "Use a security key" });
  await key.waitFor({ state: "visible" });
  await page.screenshot({ path: screenshot, fullPage: true });
  await Promise.all([
    page.waitForURL((url) => url.pathname === "/login/done"),
    key.click(),
  ]);
  const landed = await page.locator("h1").innerText();

  console.log(JSON.stringify({ registered, secondStep, landed, url: page.url() }));
} finally {
  await browser.close();
}
