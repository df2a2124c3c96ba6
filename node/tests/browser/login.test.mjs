// Signs in to the web UI with a stored user's username and password in headless Debian
// Chromium. Run by node/tests/suite/server/browser.rs, which starts an in-process node with
// storage, creates the user and passes TURNSTONE_URL, TURNSTONE_CHROMIUM,
// TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE, TURNSTONE_USERNAME and TURNSTONE_PASSWORD.
// Prints "login test: all steps passed" and exits 0 on success; on failure saves
// login-failure.png and exits 1.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing environment variable ${name}`);
  return v;
};
const BASE = env("TURNSTONE_URL");
const ARTIFACTS = env("TURNSTONE_ARTIFACTS");
const USERNAME = env("TURNSTONE_USERNAME");
const PASSWORD = env("TURNSTONE_PASSWORD");
mkdirSync(ARTIFACTS, { recursive: true });

const log = (...a) => console.log("[login]", ...a);
function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
  executablePath: env("TURNSTONE_CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  viewport: { width: 1280, height: 800 },
  colorScheme: "light",
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
const shot = (name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), animations: "disabled" });

try {
  log("a node with users offers username and password first");
  await page.goto(BASE + "/");
  await page.locator("#login-overlay").waitFor({ state: "visible" });
  await page.locator("#login-username").waitFor({ state: "visible" });
  assert(await page.locator("#login-token").isHidden(), "the token field waits behind the switch");
  await shot("login-password");

  log("the token form is one click away, and back");
  await page.locator("#login-mode").click();
  await page.locator("#login-token").waitFor({ state: "visible" });
  await page.locator("#login-mode").click();
  await page.locator("#login-username").waitFor({ state: "visible" });

  log("a wrong password is refused");
  await page.locator("#login-username").fill(USERNAME);
  await page.locator("#login-password").fill("not " + PASSWORD);
  await page.locator("#login-submit").click();
  await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
  const refused = await page.locator("#login-error").textContent();
  assert(refused.includes("Wrong username or password"), "refusal shown: " + refused);
  assert(await page.locator("#login-overlay").isVisible(), "still signed out");

  log("the right password opens the dashboard");
  await page.locator("#login-password").fill(PASSWORD);
  await page.locator("#login-submit").click();
  await page.locator("#login-overlay").waitFor({ state: "hidden" });
  await page.locator(".pane:not([hidden])").waitFor();
  const cookies = await context.cookies(BASE);
  assert(cookies.some((c) => c.name === "turnstone_auth" && c.httpOnly), "session cookie set (HttpOnly)");
  await shot("login-signed-in");
  assert(pageErrors.length === 0, "no page errors: " + pageErrors.join("; "));
  console.log("login test: all steps passed");
  await context.close();
  process.exit(0);
} catch (err) {
  console.error(err);
  try {
    await shot("login-failure");
  } catch (e) {
    // The screenshot is best effort.
  }
  await context.close();
  process.exit(1);
}
