// First-user setup in the web UI in headless Debian Chromium: the form asks for the
// bootstrap credential (the setup code the node printed), refuses a wrong one and creates
// the admin with the right one. Run by node/tests/suite/server/browser.rs, which starts an
// in-process node with storage and no users and passes TURNSTONE_URL, TURNSTONE_CHROMIUM,
// TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE and TURNSTONE_SETUP_CODE.
// Prints "setup test: all steps passed" and exits 0 on success; on failure saves
// setup-failure.png and exits 1.

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
const CODE = env("TURNSTONE_SETUP_CODE");
mkdirSync(ARTIFACTS, { recursive: true });

const log = (...a) => console.log("[setup]", ...a);
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
  log("a node without users offers the setup form, which asks for the setup code");
  await page.goto(BASE + "/");
  await page.locator("#login-overlay").waitFor({ state: "visible" });
  await page.locator("#setup-code").waitFor({ state: "visible" });
  await shot("setup-form");

  log("a wrong setup code is refused");
  await page.locator("#setup-code").fill("ts_not-the-code");
  await page.locator("#setup-username").fill("grace");
  await page.locator("#setup-display-name").fill("Grace H");
  await page.locator("#setup-password").fill("a long enough password");
  await page.locator("#login-submit").click();
  await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
  const refused = await page.locator("#login-error").textContent();
  assert(refused.includes("not right"), "refusal shown: " + refused);
  assert(await page.locator("#login-overlay").isVisible(), "still signed out");

  log("the printed code creates the admin and opens the dashboard");
  await page.locator("#setup-code").fill(CODE);
  await page.locator("#setup-password").fill("a long enough password");
  await page.locator("#login-submit").click();
  await page.locator("#login-overlay").waitFor({ state: "hidden" });
  await page.locator(".pane:not([hidden])").waitFor();
  const cookies = await context.cookies(BASE);
  assert(cookies.some((c) => c.name === "turnstone_auth" && c.httpOnly), "session cookie set (HttpOnly)");
  await shot("setup-done");
  assert(pageErrors.length === 0, "no page errors: " + pageErrors.join("; "));
  console.log("setup test: all steps passed");
  await context.close();
  process.exit(0);
} catch (err) {
  console.error(err);
  try {
    await shot("setup-failure");
  } catch (e) {
    // The screenshot is best effort.
  }
  await context.close();
  process.exit(1);
}
