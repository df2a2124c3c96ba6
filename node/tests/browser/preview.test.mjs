// Drives the web UI's preview pane in headless Debian Chromium. Run by
// node/tests/suite/server/previews.rs, which starts an in-process node and a local site and
// passes: TURNSTONE_URL, TURNSTONE_TOKEN, TURNSTONE_CHROMIUM, TURNSTONE_ARTIFACTS,
// TURNSTONE_PROFILE, TURNSTONE_PAGE_URL (an HTML page whose script would rewrite its <h1>),
// and the node's cwd holds `table.csv`. Prints "preview test: all steps passed" and exits 0
// on success; on failure saves preview-failure.png and exits 1.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing environment variable ${name}`);
  return v;
};
const BASE = env("TURNSTONE_URL");
const TOKEN = env("TURNSTONE_TOKEN");
const ARTIFACTS = env("TURNSTONE_ARTIFACTS");
const PAGE_URL = env("TURNSTONE_PAGE_URL");
mkdirSync(ARTIFACTS, { recursive: true });

const log = (...a) => console.log("[preview]", ...a);
function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
  executablePath: env("TURNSTONE_CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
  viewport: { width: 1400, height: 820 },
  colorScheme: "light",
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
const cspProblems = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => {
  // The sandboxed preview's own blocked script is expected; the UI's CSP must hold.
  if (m.type() === "error" && /Content Security Policy/.test(m.text())) cspProblems.push(m.text());
});
const shot = (name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), animations: "disabled" });

async function send(text) {
  await page.locator("#input").fill(text);
  await page.locator("#input").press("Enter");
}

try {
  log("sign in");
  await page.goto(BASE + "/");
  await page.locator("#login-token").fill(TOKEN);
  await page.locator("#login-submit").click();
  await page.locator("#login-overlay").waitFor({ state: "hidden" });
  await page.locator(".pane:not([hidden])").waitFor();
  assert(await page.locator("#preview-pane").isHidden(), "no pane before a preview");

  log("a web page opens sandboxed in the pane after approval");
  await send("CALL:open_preview " + JSON.stringify({ target: PAGE_URL }));
  const approval = page.locator(".pane:not([hidden]) .approval");
  await approval.waitFor();
  await approval.locator("button[data-action=approve]").click();
  await page.locator("#preview-pane:not([hidden])").waitFor();
  await page.waitForFunction(() => document.getElementById("preview-title").textContent === "Quarterly report");
  assert((await page.locator("#preview-kind").textContent()) === "web", "kind badge");
  assert(await page.locator("#app.with-preview").count() === 1, "layout has the pane column");
  const frame = page.locator("#preview-body iframe.preview-frame");
  assert((await frame.getAttribute("sandbox")) === "", "iframe sandbox without tokens");
  assert((await frame.getAttribute("src")).startsWith("/v1/api/previews/"), "served by the node");
  const h1 = page.frameLocator("#preview-body iframe.preview-frame").locator("h1");
  await h1.waitFor();
  assert((await h1.textContent()) === "Numbers", "the page's script did not run");
  assert(await page.locator("#preview-remote").isVisible(), "remote toggle for pages");
  await page.locator("#preview-remote").click();
  await page.waitForFunction(() => {
    const f = document.querySelector("#preview-body iframe.preview-frame");
    return f && f.getAttribute("src").endsWith("&remote=1");
  });
  await shot("preview-web");

  log("the close button hides the pane");
  await page.locator("#preview-close").click();
  await page.locator("#preview-pane").waitFor({ state: "hidden" });
  assert(await page.locator("#app.with-preview").count() === 0, "layout back to two columns");

  log("a CSV file opens unprompted as a sortable table");
  await send('CALL:open_preview {"target": "table.csv"}');
  await page.locator("#preview-pane:not([hidden]) table.preview-table").waitFor();
  const heads = await page.locator("table.preview-table th").allTextContents();
  assert(JSON.stringify(heads) === '["name","count"]', "headers: " + JSON.stringify(heads));
  const firstCell = () => page.locator("table.preview-table tbody tr").first().locator("td").nth(1).textContent();
  assert((await firstCell()) === "10", "file order first");
  await page.locator("table.preview-table th", { hasText: "count" }).click();
  await page.waitForFunction(() =>
    document.querySelector("table.preview-table tbody tr td:nth-child(2)").textContent === "2");
  assert((await page.locator("table.preview-table tbody tr").count()) === 3, "three rows");
  assert((await page.locator(".pane:not([hidden]) .approval").count()) === 1, "no second approval");
  await shot("preview-table");

  assert(pageErrors.length === 0, "no page errors: " + JSON.stringify(pageErrors));
  assert(cspProblems.length === 0, "no CSP errors in the UI: " + JSON.stringify(cspProblems));
  log("preview test: all steps passed");
  await context.close();
  process.exit(0);
} catch (e) {
  console.error("[preview] FAILED:", e && e.stack ? e.stack : e);
  console.error("[preview] page errors:", JSON.stringify(pageErrors));
  try {
    await shot("preview-failure");
  } catch (err) {
    // the page may be gone
  }
  await context.close().catch(() => {});
  process.exit(1);
}
