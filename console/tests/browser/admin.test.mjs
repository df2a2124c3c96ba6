// Drives the console's Admin area in headless Debian Chromium: users (create, list, sign in
// as the new user by password, whose viewer role is refused the admin routes), scheduled
// tasks (create a cron task, see its next run, disable it, delete it), cluster settings
// (save, refuse an out-of-range value, reset) and model aliases (add with a key that is never
// shown again, refuse a duplicate, delete; a reranker selected under Roles → Reranker, whose
// deletion is refused until the role is cleared), roles (assign one to a user; create one with
// permission checkboxes, refuse one without any, delete another), API tokens (the secret
// shown once, revoke), tool policies (add, refuse an empty pattern, change the action),
// skills (add, refuse a duplicate, disable, delete), memories (read from a node, delete
// there) and usage (the seeded calls by day and by model, totals, an empty range), with the
// keyboard on the tabs. Run by console/tests/suite/browser.rs with a console that has storage; it passes
// CONSOLE_URL, TURNSTONE_TOKEN, TURNSTONE_CHROMIUM, TURNSTONE_ARTIFACTS, TURNSTONE_PROFILE.
// Prints "admin browser test: all steps passed" and exits 0; on failure saves
// admin-failure.png and exits 1.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`missing environment variable ${name}`);
  return v;
};
const BASE = env("CONSOLE_URL");
const TOKEN = env("TURNSTONE_TOKEN");
const ARTIFACTS = env("TURNSTONE_ARTIFACTS");
mkdirSync(ARTIFACTS, { recursive: true });
const log = (...a) => console.log("[admin-browser]", ...a);
function assert(cond, message) {
  if (!cond) throw new Error("assertion failed: " + message);
}

const context = await chromium.launchPersistentContext(env("TURNSTONE_PROFILE"), {
  executablePath: env("TURNSTONE_CHROMIUM"),
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  viewport: { width: 1360, height: 900 },
  deviceScaleFactor: 1,
  colorScheme: "light",
});
context.setDefaultTimeout(20000);
const page = context.pages()[0] || (await context.newPage());
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("dialog", (d) => d.accept());
const shot = (name) => page.screenshot({ path: join(ARTIFACTS, name + ".png"), animations: "disabled" });
async function step(name, fn) {
  log("step:", name);
  await fn();
}

try {
  await step("sign in with the token", async () => {
    await page.goto(BASE + "/");
    await page.locator("#login-overlay").waitFor({ state: "visible" });
    await page.locator("#login-token").fill(TOKEN);
    await page.locator("#login-submit").click();
    await page.locator("#login-overlay").waitFor({ state: "hidden" });
  });

  await step("the admin area lists and creates users", async () => {
    await page.locator("#admin-btn").click();
    await page.locator("#admin-panel").waitFor({ state: "visible" });
    assert((await page.locator("#admin-btn").getAttribute("aria-expanded")) === "true", "the button says it is open");
    await page.locator("#users-empty").waitFor({ state: "visible" });
    await page.getByLabel("Username").fill("ui-user");
    await page.getByLabel("Display name").fill("UI User");
    await page.locator("#user-password").fill("correct horse battery");
    await page.locator("#user-role").selectOption("viewer");
    await page.locator("#user-submit").click();
    await page.locator('#users-body tr[data-username="ui-user"]').waitFor();
    const role = await page.getByLabel("Role of ui-user").inputValue();
    assert(role === "builtin-viewer", "the role is shown: " + role);
    // A bad user: the server's message is shown.
    await page.getByLabel("Username").fill("ui-user");
    await page.getByLabel("Display name").fill("Again");
    await page.locator("#user-password").fill("correct horse battery");
    await page.locator("#user-submit").click();
    await page.waitForFunction(() => document.getElementById("user-error").textContent.includes("taken"));
    await shot("admin-users");
  });

  await step("the schedules tab (by keyboard) creates a cron task with its next run", async () => {
    await page.locator("#tab-users").focus();
    await page.keyboard.press("ArrowRight");
    await page.locator("#admin-schedules").waitFor({ state: "visible" });
    assert((await page.locator("#tab-schedules").getAttribute("aria-selected")) === "true", "tab selected");
    await page.locator("#schedule-name").fill("ui-nightly");
    await page.locator("#schedule-cron").fill("0 3 * * *");
    await page.locator("#schedule-target").selectOption("pool");
    await page.locator("#schedule-message").fill("write the nightly report");
    await page.locator("#schedule-submit").click();
    const row = page.locator('#schedules-body tr[data-name="ui-nightly"]');
    await row.waitFor();
    const next = await row.locator(".next-run").textContent();
    assert(next && next !== "—", "a next run is shown: " + next);
    assert((await row.locator(".last-result").textContent()) === "never run", "no run yet");
    // A bad expression: the server's message.
    await page.locator("#schedule-name").fill("broken");
    await page.locator("#schedule-cron").fill("61 * * * *");
    await page.locator("#schedule-message").fill("x");
    await page.locator("#schedule-submit").click();
    await page.waitForFunction(() => document.getElementById("schedule-error").textContent.includes("Invalid cron_expr"));
    await shot("admin-schedules");
    // Disable, then delete.
    await row.getByRole("checkbox").uncheck();
    await page.waitForFunction(() => {
      const r = document.querySelector('#schedules-body tr[data-name="ui-nightly"] input[type=checkbox]');
      return r && !r.checked;
    });
    await row.getByRole("button", { name: "Delete task ui-nightly" }).click();
    await row.waitFor({ state: "detached" });
  });

  await step("the settings tab (by keyboard) saves a cluster setting and refuses a bad one", async () => {
    await page.locator("#tab-schedules").focus();
    await page.keyboard.press("ArrowRight");
    await page.locator("#admin-settings").waitFor({ state: "visible" });
    assert((await page.locator("#tab-settings").getAttribute("aria-selected")) === "true", "tab selected");
    const row = page.locator('#settings-body tr[data-key="server.approval_timeout"]');
    await row.waitFor();
    await page.getByLabel("Value of server.approval_timeout").fill("90");
    await row.getByRole("button", { name: "Save server.approval_timeout" }).click();
    await page.waitForFunction(() => document.getElementById("settings-result").textContent.includes("server.approval_timeout saved"));
    await row.getByRole("button", { name: "Reset server.approval_timeout" }).waitFor();
    assert((await page.getByLabel("Value of server.approval_timeout").inputValue()) === "90", "the stored value is shown");
    await page.getByLabel("Value of tools.search", { exact: true }).selectOption("off");
    await page.getByRole("button", { name: "Save tools.search", exact: true }).click();
    await page.waitForFunction(() => document.getElementById("settings-result").textContent.includes("tools.search saved"));
    // Out of range: the server's message names the key.
    await page.getByLabel("Value of session.auto_compact_pct").fill("7");
    await page.getByRole("button", { name: "Save session.auto_compact_pct" }).click();
    await page.waitForFunction(() => document.getElementById("settings-error").textContent.includes("session.auto_compact_pct"));
    await shot("admin-settings");
    await row.getByRole("button", { name: "Reset server.approval_timeout" }).click();
    await page.waitForFunction(() => document.getElementById("settings-result").textContent.includes("reset"));
  });

  await step("the models tab adds an alias whose key is never shown, and deletes it", async () => {
    await page.locator("#tab-models").click();
    await page.locator("#admin-models").waitFor({ state: "visible" });
    await page.locator("#models-empty").waitFor({ state: "visible" });
    await page.getByLabel("Alias").fill("ui-fast");
    await page.locator("#model-name").fill("fast-model");
    await page.locator("#model-base-url").fill("http://127.0.0.1:9/v1");
    await page.locator("#model-api-key").fill("sk-ui-secret");
    await page.locator("#model-submit").click();
    const row = page.locator('#models-body tr[data-alias="ui-fast"]');
    await row.waitFor();
    assert((await row.locator("td").nth(4).textContent()) === "set", "the key is marked set");
    assert(!(await page.content()).includes("sk-ui-secret"), "the key is not on the page");
    // The same alias again: the server's message.
    await page.getByLabel("Alias").fill("ui-fast");
    await page.locator("#model-name").fill("other");
    await page.locator("#model-submit").click();
    await page.waitForFunction(() => document.getElementById("model-error").textContent.includes("taken"));
    await shot("admin-models");
    // The new-workstream dialog offers the alias.
    await page.locator("#new-ws-btn").click();
    await page.locator('#new-ws-model option[value="ui-fast"]').waitFor({ state: "attached" });
    await page.getByLabel("Model", { exact: true }).selectOption("ui-fast");
    await shot("new-ws-pickers");
    await page.locator("#new-ws-cancel").click();
    await page.locator("#new-ws-overlay").waitFor({ state: "hidden" });
    await row.getByRole("button", { name: "Delete model ui-fast" }).click();
    await row.waitFor({ state: "detached" });
  });

  await step("the models tab adds a reranker and selects it under Roles → Reranker", async () => {
    await page.getByLabel("Alias").fill("ui-rr");
    await page.locator("#model-name").fill("qwen3-reranker");
    await page.locator("#model-base-url").fill("http://127.0.0.1:9/rerank");
    await page.locator("#model-rerank").check();
    await page.locator("#model-submit").click();
    const row = page.locator('#models-body tr[data-alias="ui-rr"]');
    await row.waitFor();
    assert((await row.locator("td").first().textContent()).includes("reranker"), "marked as a reranker");
    const select = page.locator("#role-reranker");
    await page.locator('#role-reranker option[value="ui-rr"]').waitFor({ state: "attached" });
    await select.selectOption("ui-rr");
    await page.waitForFunction(() => document.getElementById("role-result").textContent.includes("Reranker: ui-rr"));
    assert((await select.inputValue()) === "ui-rr", "the role is shown selected");
    await shot("admin-models-reranker");
    // A selected reranker cannot be deleted: the server's message.
    await row.getByRole("button", { name: "Delete model ui-rr" }).click();
    await page.waitForFunction(() => document.body.textContent.includes("clear the role first"));
    await select.selectOption("");
    await page.waitForFunction(() => document.getElementById("role-result").textContent.includes("No reranker"));
    await row.getByRole("button", { name: "Delete model ui-rr" }).click();
    await row.waitFor({ state: "detached" });
  });

  await step("the users tab assigns a role", async () => {
    await page.locator("#tab-users").click();
    await page.locator("#admin-users").waitFor({ state: "visible" });
    await page.getByLabel("Role of ui-user").selectOption("builtin-operator");
    await page.waitForFunction(() => {
      const s = document.querySelector('#users-body tr[data-username="ui-user"] select');
      return s && s.value === "builtin-operator" && document.body.textContent.includes("Role of ui-user changed");
    });
  });

  await step("the tokens tab shows a new token's secret once, then revokes it", async () => {
    await page.locator("#tab-tokens").click();
    await page.locator("#admin-tokens").waitFor({ state: "visible" });
    await page.locator("#tokens-empty").waitFor({ state: "visible" });
    await page.locator('#token-user option', { hasText: "ui-user" }).waitFor({ state: "attached" });
    await page.getByLabel("User", { exact: true }).selectOption({ label: "ui-user" });
    await page.locator("#token-name").fill("ui-ci");
    await page.locator("#token-scopes").selectOption("read,write");
    await page.locator("#token-submit").click();
    await page.locator("#token-secret").waitFor({ state: "visible" });
    const secret = await page.locator("#token-secret-value").inputValue();
    assert(secret.startsWith("ts_"), "the new token is shown: " + secret.slice(0, 3));
    const row = page.locator('#tokens-body tr[data-name="ui-ci"]');
    await row.waitFor();
    assert(!(await row.textContent()).includes(secret), "the list shows only the prefix");
    await shot("admin-tokens");
    await row.getByRole("button", { name: "Revoke token ui-ci" }).click();
    await row.waitFor({ state: "detached" });
  });

  await step("the policies tab adds a deny, refuses an empty pattern and changes the action", async () => {
    await page.locator("#tab-tokens").focus();
    await page.keyboard.press("ArrowRight");
    await page.locator("#admin-policies").waitFor({ state: "visible" });
    assert((await page.locator("#tab-policies").getAttribute("aria-selected")) === "true", "tab selected");
    await page.locator("#policies-empty").waitFor({ state: "visible" });
    await page.locator("#policy-name").fill("ui-no-bash");
    await page.getByLabel("Tool pattern").fill("bash");
    await page.locator("#policy-action").selectOption("deny");
    await page.locator("#policy-priority").fill("5");
    await page.locator("#policy-submit").click();
    const row = page.locator('#policies-body tr[data-name="ui-no-bash"]');
    await row.waitFor();
    assert((await page.getByLabel("Action of ui-no-bash").inputValue()) === "deny", "stored as deny");
    await page.locator("#policy-name").fill("blank");
    await page.getByLabel("Tool pattern").fill("   ");
    await page.locator("#policy-submit").click();
    await page.waitForFunction(() => document.getElementById("policy-error").textContent.includes("tool_pattern must not be empty"));
    await page.getByLabel("Action of ui-no-bash").selectOption("ask");
    await page.waitForFunction(() => document.body.textContent.includes("ui-no-bash updated"));
    assert((await page.getByLabel("Action of ui-no-bash").inputValue()) === "ask", "changed to ask");
    await shot("admin-policies");
  });

  await step("the skills tab adds a skill, refuses a duplicate, disables and deletes it", async () => {
    await page.locator("#tab-skills").click();
    await page.locator("#admin-skills").waitFor({ state: "visible" });
    await page.locator("#skill-name").fill("ui-skill");
    await page.getByLabel("Description").fill("made in the browser");
    await page.locator("#skill-content").fill("Answer in one line.");
    await page.locator("#skill-submit").click();
    const row = page.locator('#skills-body tr[data-name="ui-skill"]');
    await row.waitFor();
    await page.locator("#skill-name").fill("ui-skill");
    await page.locator("#skill-content").fill("again");
    await page.locator("#skill-submit").click();
    await page.waitForFunction(() => document.getElementById("skill-error").textContent.includes("already exists"));
    await page.getByLabel("Enabled: ui-skill").uncheck();
    await page.waitForFunction(() => {
      const c = document.querySelector('#skills-body tr[data-name="ui-skill"] input[type=checkbox]');
      return c && !c.checked;
    });
    await shot("admin-skills");
    await row.getByRole("button", { name: "Delete skill ui-skill" }).click();
    await row.waitFor({ state: "detached" });
  });

  await step("the memories tab lists a node's memory and deletes it there", async () => {
    await page.locator("#tab-memories").click();
    await page.locator("#admin-memories").waitFor({ state: "visible" });
    const row = page.locator('#memories-body tr[data-name="ui-memo"]');
    await row.waitFor();
    assert((await row.locator("td").nth(4).textContent()) === "node-m", "the node is shown");
    await shot("admin-memories");
    await row.getByRole("button", { name: "Delete memory ui-memo" }).click();
    await row.waitFor({ state: "detached" });
    await page.locator("#memories-empty").waitFor({ state: "visible" });
  });

  await step("the roles tab creates a role from permission checkboxes and deletes one", async () => {
    await page.locator("#tab-roles").click();
    await page.locator("#admin-roles").waitFor({ state: "visible" });
    await page.locator('#roles-body tr[data-name="admin"]').waitFor();
    assert((await page.locator('#roles-body tr[data-name="admin"]').textContent()).includes("built-in"), "built-in roles are read-only");
    // No permission ticked: refused before any request.
    await page.locator("#role-name").fill("ui-empty");
    await page.locator("#role-submit").click();
    await page.waitForFunction(() => document.getElementById("role-error").textContent.includes("at least one permission"));
    await page.locator("#role-name").fill("ui-auditor");
    await page.getByLabel("Shown as").fill("UI auditor");
    await page.getByLabel("admin.usage", { exact: true }).check();
    await page.getByLabel("read", { exact: true }).check();
    await page.locator("#role-submit").click();
    const row = page.locator('#roles-body tr[data-name="ui-auditor"]');
    await row.waitFor();
    assert((await row.locator("td").nth(2).textContent()) === "admin.usage, read", "the permissions are shown");
    assert(!(await page.getByLabel("read", { exact: true }).isChecked()), "the form is reset");
    // A second role, deleted again.
    await page.locator("#role-name").fill("ui-temp");
    await page.getByLabel("workstreams.create", { exact: true }).check();
    await page.locator("#role-submit").click();
    const temp = page.locator('#roles-body tr[data-name="ui-temp"]');
    await temp.waitFor();
    await shot("admin-roles");
    await temp.getByRole("button", { name: "Delete role ui-temp" }).click();
    await temp.waitFor({ state: "detached" });
  });

  await step("the usage tab (by keyboard) shows the calls by day and by model with totals", async () => {
    await page.locator("#tab-roles").focus();
    await page.keyboard.press("ArrowRight");
    await page.locator("#admin-usage").waitFor({ state: "visible" });
    assert((await page.locator("#tab-usage").getAttribute("aria-selected")) === "true", "tab selected");
    const today = new Date().toISOString().slice(0, 10);
    const day = page.locator(`#usage-body tr[data-key="${today}"]`);
    await day.waitFor();
    const cells = async (loc) => (await loc.locator("td").allTextContents());
    assert(JSON.stringify(await cells(day)) === JSON.stringify(["1,500", "150", "3", "3"]), "today's calls: " + (await cells(day)));
    assert(JSON.stringify(await cells(page.locator("#usage-totals"))) === JSON.stringify(["1,500", "150", "3", "3"]), "the totals");
    assert((await page.locator("#usage-caption").textContent()) === "Model usage by day", "the caption says the grouping");
    await page.getByLabel("Group by").selectOption("model");
    const big = page.locator('#usage-body tr[data-key="ui-big"]');
    await big.waitFor();
    assert(JSON.stringify(await cells(big)) === JSON.stringify(["1,200", "100", "1", "1"]), "ui-big: " + (await cells(big)));
    assert((await page.locator("#usage-body tr").first().getAttribute("data-key")) === "ui-big", "the biggest model first");
    assert((await page.locator("#usage-key-head").textContent()) === "Model", "the key column is named");
    await shot("admin-usage");
    // A range with no calls.
    await page.locator("#usage-since").fill("2001-01-01");
    await page.locator("#usage-until").fill("2001-01-31");
    await page.locator("#usage-submit").click();
    await page.locator("#usage-empty").waitFor({ state: "visible" });
    assert(JSON.stringify(await cells(page.locator("#usage-totals"))) === JSON.stringify(["0", "0", "0", "0"]), "no totals");
    assert((await page.locator("#usage-caption").textContent()).includes("from 2001-01-01 to 2001-01-31"), "the caption says the range");
  });

  await step("the new user signs in by password and is refused the admin routes", async () => {
    await page.locator("#logout-btn").click();
    await page.locator("#login-overlay").waitFor({ state: "visible" });
    await page.locator("#login-username").fill("ui-user");
    await page.locator("#login-password").fill("correct horse battery");
    await page.locator("#login-submit").click();
    await page.locator("#login-overlay").waitFor({ state: "hidden" });
    if (await page.locator("#admin-panel").isHidden()) await page.locator("#admin-btn").click();
    await page.locator("#tab-users").click();
    await page.waitForFunction(() => document.getElementById("user-error").textContent.includes("Forbidden"));
    await shot("admin-viewer");
  });

  assert(pageErrors.length === 0, "no page errors: " + pageErrors.join("; "));
  console.log("admin browser test: all steps passed");
  await context.close();
} catch (e) {
  console.error(e);
  try { await shot("admin-failure"); } catch (_) { /* best effort */ }
  await context.close();
  process.exit(1);
}
