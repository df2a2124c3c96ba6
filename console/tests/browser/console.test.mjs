// Drives the console dashboard and a node UI proxied through it, in headless Debian
// Chromium. Run by console/tests/suite/browser.rs (and the whole-cluster test), which start
// a console with nodes and pass: CONSOLE_URL, TURNSTONE_TOKEN, TURNSTONE_CHROMIUM,
// TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE, EXPECT_NODES (comma list), EXPECT_DRIFT (node id
// or empty), MESSAGE_NODE (the node whose UI is used through the proxy).
// Prints "console browser test: all steps passed" and exits 0 on success; on failure saves
// failure.png and exits 1.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name, fallback) => {
  const v = process.env[name];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw new Error(`missing environment variable ${name}`);
  }
  return v;
};
const BASE = env("CONSOLE_URL");
const TOKEN = env("TURNSTONE_TOKEN");
const ARTIFACTS = env("TURNSTONE_ARTIFACTS");
const NODES = env("EXPECT_NODES").split(",").filter(Boolean);
const DRIFT = env("EXPECT_DRIFT", "");
const MESSAGE_NODE = env("MESSAGE_NODE");
mkdirSync(ARTIFACTS, { recursive: true });

const TIMEOUT = 20000;
const log = (...a) => console.log("[console-browser]", ...a);
function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
  executablePath: env("TURNSTONE_CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1360, height: 860 },
  deviceScaleFactor: 1,
  colorScheme: "light",
});
context.setDefaultTimeout(TIMEOUT);
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
const cspProblems = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => {
  if (m.type() === "error" && /Content Security Policy|Uncaught|TypeError|ReferenceError/.test(m.text())) cspProblems.push(m.text());
});
const shot = (name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), animations: "disabled" });
async function step(name, fn) {
  log("step:", name);
  await fn();
}

try {
  await step("the dashboard asks for a token", async () => {
    await page.goto(BASE + "/");
    await page.locator("#login-overlay").waitFor({ state: "visible" });
    await page.locator("#login-token").fill("wrong-token");
    await page.locator("#login-submit").click();
    await page.waitForFunction(() => document.getElementById("login-error").textContent.length > 0);
    await shot("console-login");
  });

  await step("signing in shows every node, live", async () => {
    await page.locator("#login-token").fill(TOKEN);
    await page.locator("#login-submit").click();
    await page.locator("#login-overlay").waitFor({ state: "hidden" });
    await page.locator("#conn[data-state=open]").waitFor();
    for (const id of NODES) await page.locator(`#nodes-body tr[data-node-id="${id}"]`).waitFor();
    assert((await page.locator("#nodes-body tr").count()) === NODES.length, "one row per node");
    const first = (await page.evaluate(() => window.turnstoneConsole.events()))[0];
    assert(first === "snapshot", "the stream starts with a snapshot: " + first);
  });

  if (DRIFT) {
    await step("the drifted node is flagged", async () => {
      await page.locator(`#nodes-body tr[data-node-id="${DRIFT}"][data-drift="1"] .badge.drift`).waitFor();
      await page.locator("#drift-banner").waitFor({ state: "visible" });
      assert((await page.locator("#drift-banner").textContent()).includes(DRIFT), "banner names the node");
      await page.locator("#m-version.drift").waitFor();
    });
  }

  let wsId;
  await step("a workstream made on a node appears without a reload", async () => {
    const before = await page.locator("#ws-body tr").count();
    wsId = await page.evaluate(async (node) => {
      const r = await fetch(`/node/${node}/v1/api/workstreams/new`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: "from-browser" }),
      });
      if (!r.ok) throw new Error("create through the proxy: " + r.status);
      return (await r.json()).ws_id;
    }, MESSAGE_NODE);
    await page.locator(`#ws-body tr[data-ws-id="${wsId}"]`).waitFor();
    assert((await page.locator("#ws-body tr").count()) === before + 1, "one more row");
  });

  await step("filters and the create dialog work", async () => {
    await page.locator("#ws-search").fill("from-browser");
    await page.waitForFunction(() => document.querySelectorAll("#ws-body tr").length === 1);
    await page.locator("#ws-clear").click();
    await page.locator(`.pill[data-state=idle]`).click();
    await page.waitForFunction(() => [...document.querySelectorAll("#ws-body tr")].every((r) => r.dataset.state === "idle"));
    await page.locator(`.pill[data-state=idle]`).click();
    await page.locator("#new-ws-btn").click();
    await page.locator("#new-ws-overlay").waitFor({ state: "visible" });
    const options = await page.locator("#new-ws-node option").allTextContents();
    assert(options[0].startsWith("Auto") && options[1].startsWith("General pool"), "auto and pool first: " + options);
    assert(options.length === 2 + NODES.length, "every node offered: " + options);
    await page.locator("#new-ws-name").fill("dialog-made");
    await shot("console-new-workstream");
    await page.locator("#new-ws-submit").click();
    await page.locator("#new-ws-overlay").waitFor({ state: "hidden" });
    await page.locator(".toast.ok", { hasText: "queued on" }).first().waitFor();
    const text = await page.locator(".toast.ok", { hasText: "queued on" }).first().textContent();
    assert(!DRIFT || !text.includes(DRIFT), "auto never picks the drifted node: " + text);
    await shot("console");
  });

  await step("a workstream row opens the node UI through the proxy", async () => {
    await page.locator(`#ws-body tr[data-ws-id="${wsId}"]`).click();
    await page.waitForURL((u) => u.pathname === `/node/${MESSAGE_NODE}/` && u.searchParams.get("ws_id") === wsId);
    await page.locator("#turnstone-console-banner").waitFor();
    assert((await page.locator("#turnstone-console-banner strong").textContent()) === MESSAGE_NODE, "banner names the node");
    await page.waitForFunction((id) => document.querySelector(".pane:not([hidden])")?.dataset.wsId === id, wsId);
    assert(await page.locator("#login-overlay").isHidden(), "the console session is enough");
  });

  await step("a message streams back through the proxy", async () => {
    const text = "Hello through the console proxy";
    await page.locator("#input").fill(text);
    await page.locator("#input").press("Enter");
    await page.locator(".pane:not([hidden]) .msg.assistant[data-final]").waitFor();
    const reply = await page.locator(".pane:not([hidden]) .msg.assistant .md").last().textContent();
    assert(reply === text, "echoed reply: " + JSON.stringify(reply));
    // The idle state follows the reply on the same stream; a loaded machine (CI with other
    // builds running) can be slow to paint it, so this wait is longer than the default.
    try {
      await page.locator("#ws-state-label[data-state=idle]").waitFor({ timeout: 60000 });
    } catch (e) {
      const label = await page.locator("#ws-state-label").evaluate((n) => [n.dataset.state, n.textContent]);
      throw new Error("state label never idle; it shows " + JSON.stringify(label) + ": " + e.message);
    }
    await shot("proxied-node");
  });

  await step("back to the console, in dark", async () => {
    await page.locator("#turnstone-console-banner a").click();
    await page.waitForURL((u) => u.pathname === "/");
    await page.locator("#conn[data-state=open]").waitFor();
    await page.locator("#theme-toggle").click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === "dark");
    await shot("console-dark");
  });

  assert(pageErrors.length === 0, "no uncaught page errors: " + JSON.stringify(pageErrors));
  assert(cspProblems.length === 0, "no script or CSP errors: " + JSON.stringify(cspProblems));
  log("console browser test: all steps passed");
  await context.close();
  process.exit(0);
} catch (e) {
  console.error("[console-browser] FAILED:", e && e.stack ? e.stack : e);
  console.error("[console-browser] page errors:", JSON.stringify(pageErrors));
  try {
    await shot("failure");
  } catch (err) {
    // the page may be gone
  }
  await context.close().catch(() => {});
  process.exit(1);
}
