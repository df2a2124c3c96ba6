// First-user setup in the web UI in headless Debian Chromium: the form asks for the
// bootstrap credential (the setup code the node printed), refuses a wrong one and creates
// the admin with the right one. Run by node/tests/suite/server/browser.rs, which starts an
// in-process node with storage and no users and passes TURNSTONE_URL, TURNSTONE_CHROMIUM,
// TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE and TURNSTONE_SETUP_CODE.
// Prints "setup test: all steps passed" and exits 0 on success; on failure saves
// setup-failure.png and exits 1.

import { assert, env, runBrowserTest } from "./harness.mjs";

const CODE = env("TURNSTONE_SETUP_CODE");

await runBrowserTest("setup", async ({ page, context, log, shot, base }) => {
  log("a node without users offers the setup form, which asks for the setup code");
  await page.goto(base + "/");
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
  const cookies = await context.cookies(base);
  assert(cookies.some((c) => c.name === "turnstone_auth" && c.httpOnly), "session cookie set (HttpOnly)");
  await shot("setup-done");
});
