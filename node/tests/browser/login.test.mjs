// Signs in to the web UI with a stored user's username and password in headless Debian
// Chromium. Run by node/tests/suite/server/browser.rs, which starts an in-process node with
// storage, creates the user and passes TURNSTONE_URL, TURNSTONE_CHROMIUM,
// TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE, TURNSTONE_USERNAME and TURNSTONE_PASSWORD.
// Prints "login test: all steps passed" and exits 0 on success; on failure saves
// login-failure.png and exits 1.

import { assert, env, runBrowserTest } from "./harness.mjs";

const USERNAME = env("TURNSTONE_USERNAME");
const PASSWORD = env("TURNSTONE_PASSWORD");

await runBrowserTest("login", async ({ page, context, log, shot, base }) => {
  // What was typed stays in the field it was typed into (focus moved late once sent the
  // password into the username field).
  const assertFields = async (username, password) => {
    const held = [await page.locator("#login-username").inputValue(), await page.locator("#login-password").inputValue()];
    assert(held[0] === username && held[1] === password, "fields hold what was typed: " + JSON.stringify(held[0]));
  };

  log("a node with users offers username and password first");
  await page.goto(base + "/");
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
  await assertFields(USERNAME, "not " + PASSWORD);
  await page.locator("#login-submit").click();
  await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
  const refused = await page.locator("#login-error").textContent();
  assert(refused.includes("Wrong username or password"), "refusal shown: " + refused);
  assert(await page.locator("#login-overlay").isVisible(), "still signed out");

  log("the right password opens the dashboard");
  await page.locator("#login-password").fill(PASSWORD);
  await assertFields(USERNAME, PASSWORD);
  await page.locator("#login-submit").click();
  await page.locator("#login-overlay").waitFor({ state: "hidden" });
  await page.locator(".pane:not([hidden])").waitFor();
  const cookies = await context.cookies(base);
  assert(cookies.some((c) => c.name === "turnstone_auth" && c.httpOnly), "session cookie set (HttpOnly)");
  await shot("login-signed-in");
});
