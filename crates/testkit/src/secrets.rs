//! Fake secrets of many formats, each inside the tool output that would show it (a `bash`
//! command's output, a file, an MCP result): the fixtures of the output guard's tests in
//! `turnstone-governance` and of the end-to-end redaction tests. Every secret is generated
//! (deterministic, never a real credential).
//!
//! The one case without an `END` line (a PEM key cut off by truncation) is last: a text that
//! joins several cases keeps it at its end.

/// Builds a fake secret of `len` characters from `alphabet` (deterministic, no real key).
pub fn fake(alphabet: &str, len: usize, seed: usize) -> String {
    let chars: Vec<char> = alphabet.chars().collect();
    (0..len)
        .map(|i| chars[(i * 7 + seed * 13 + i / 3) % chars.len()])
        .collect()
}

pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const UPPER_NUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
pub const HEX: &str = "0123456789abcdef";
pub const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// (name, tool output containing the secret, the secret itself); the unterminated PEM key
/// last.
pub fn cases() -> Vec<(&'static str, String, String)> {
    let mut cases = Vec::new();
    let mut add =
        |name: &'static str, secret: String, output: String| cases.push((name, output, secret));

    let s = format!("AKIA{}", fake(UPPER_NUM, 16, 1));
    add(
        "aws access key id (bash: aws configure list)",
        s.clone(),
        format!(
            "      Name                    Value\naccess_key     ****************{s}   shared-credentials-file\n"
        ),
    );
    let s = fake(B64, 40, 2);
    add(
        "aws secret key (read_file ~/.aws/credentials)",
        s.clone(),
        format!(
            "[default]\naws_access_key_id = AKIA{}\naws_secret_access_key = {s}\nregion = eu-west-1\n",
            fake(UPPER_NUM, 16, 3)
        ),
    );
    let s = fake(B64, 120, 4);
    add(
        "aws session token (env)",
        s.clone(),
        format!("AWS_SESSION_TOKEN={s}\nAWS_REGION=us-east-1\n"),
    );
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\\n{}\\n{}\\n-----END PRIVATE KEY-----\\n",
        fake(B64, 64, 5),
        fake(B64, 40, 6)
    );
    let gcp = format!(
        "{{\n  \"type\": \"service_account\",\n  \"project_id\": \"demo-project\",\n  \"private_key_id\": \"{}\",\n  \"private_key\": \"{pem}\",\n  \"client_email\": \"bot@demo-project.iam.gserviceaccount.com\"\n}}\n",
        fake(HEX, 40, 7)
    );
    add(
        "gcp service-account json (read_file key.json)",
        fake(B64, 64, 5),
        gcp.clone(),
    );
    add("gcp private_key_id", fake(HEX, 40, 7), gcp);
    let s = format!("AIza{}", fake(URLSAFE, 35, 8));
    add(
        "google api key (mcp result)",
        s.clone(),
        format!("{{\"config\": {{\"maps_key\": \"{s}\"}}}}"),
    );
    let s = fake(B64, 86, 9) + "==";
    add(
        "azure storage connection string",
        s.clone(),
        format!(
            "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={s};EndpointSuffix=core.windows.net\n"
        ),
    );
    let s = format!("{}8Q~{}", fake(ALNUM, 3, 10), fake(ALNUM, 34, 11));
    add(
        "azure client secret",
        s.clone(),
        format!("Created secret. Value: {s} (copy it now)\n"),
    );
    let s = format!("sk-proj-{}", fake(URLSAFE, 48, 12));
    add(
        "openai project key (env)",
        s.clone(),
        format!("OPENAI_API_KEY={s}\n"),
    );
    let s = format!("sk-{}", fake(ALNUM, 48, 13));
    add(
        "openai legacy key in python source",
        s.clone(),
        format!("client = OpenAI(api_key=\"{s}\")\n"),
    );
    let s = format!("sk-ant-api03-{}", fake(URLSAFE, 80, 14));
    add(
        "anthropic key (curl -v header)",
        s.clone(),
        format!("> POST /v1/messages HTTP/2\n> x-api-key: {s}\n> content-type: application/json\n"),
    );
    let s = format!("hf_{}", fake(ALNUM, 34, 15));
    add(
        "huggingface token",
        s.clone(),
        format!("Token saved: {s}\n"),
    );
    let s = format!("ghp_{}", fake(ALNUM, 36, 16));
    add(
        "github classic token (git remote -v)",
        s.clone(),
        format!("origin\thttps://{s}@github.com/org/repo.git (fetch)\n"),
    );
    let s = format!("github_pat_{}", fake(URLSAFE.trim_end_matches('-'), 82, 17));
    add(
        "github fine-grained token",
        s.clone(),
        format!("export GH_TOKEN={s}\n"),
    );
    let s = format!("glpat-{}", fake(URLSAFE, 20, 18));
    add("gitlab token", s.clone(), format!("PRIVATE-TOKEN: {s}\n"));
    let s = format!(
        "xoxb-{}-{}-{}",
        fake("0123456789", 12, 19),
        fake("0123456789", 13, 20),
        fake(ALNUM, 24, 21)
    );
    add(
        "slack bot token",
        s.clone(),
        format!("slack:\n  bot_token: {s}\n"),
    );
    let s = format!(
        "https://hooks.slack.com/services/T{}/B{}/{}",
        fake(UPPER_NUM, 8, 22),
        fake(UPPER_NUM, 8, 23),
        fake(ALNUM, 24, 24)
    );
    add("slack webhook url", s.clone(), format!("webhook = {s}\n"));
    let s = format!("sk_live_{}", fake(ALNUM, 24, 25));
    add(
        "stripe secret key",
        s.clone(),
        format!("Stripe.api_key = '{s}'\n"),
    );
    let s = format!("whsec_{}", fake(ALNUM, 32, 26));
    add(
        "stripe webhook secret",
        s.clone(),
        format!("Ready! Your webhook signing secret is {s} (^C to quit)\n"),
    );
    let header = fake(URLSAFE, 20, 27);
    let payload = fake(URLSAFE, 40, 28);
    let signature = fake(URLSAFE, 43, 29);
    let s = format!("eyJ{header}.eyJ{payload}.{signature}");
    add(
        "jwt in a log line",
        s.clone(),
        format!("2026-01-01T00:00:00Z INFO session token={s} user=42\n"),
    );
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n{}\n-----END RSA PRIVATE KEY-----\n",
        fake(B64, 64, 30),
        fake(B64, 64, 31)
    );
    add("pem rsa private key (cat id_rsa)", fake(B64, 64, 30), pem);
    let s = fake(ALNUM, 16, 34) + "!9";
    add(
        "postgres url with password",
        s.clone(),
        format!("DATABASE_URL=postgresql://app:{s}@db.internal:5432/app\n"),
    );
    let s = fake(ALNUM, 14, 35) + "42";
    add(
        "redis url in an error message",
        s.clone(),
        format!("Error: connection refused (redis://default:{s}@cache:6379/0)\n"),
    );
    let s = "hunter2-Correct-Horse".to_owned();
    add(
        ".env password",
        s.clone(),
        format!("# local settings\nDB_HOST=localhost\nDB_PASSWORD={s}\nDEBUG=true\n"),
    );
    let s = fake(ALNUM, 40, 36);
    add(
        ".env secret key, quoted",
        s.clone(),
        format!("export SECRET_KEY=\"{s}\"\n"),
    );
    let s = fake(ALNUM, 32, 37);
    add(
        "json api_key in an mcp result",
        s.clone(),
        format!("{{\"service\": \"search\", \"api_key\": \"{s}\", \"enabled\": true}}"),
    );
    let s = fake(ALNUM, 20, 38) + "Z9";
    add(
        "yaml password in a config file",
        s.clone(),
        format!("database:\n  host: db\n  password: {s}\n"),
    );
    let s = fake(URLSAFE, 40, 39);
    add(
        "bearer token in curl -v output",
        s.clone(),
        format!("> GET /api HTTP/1.1\n> Authorization: Bearer {s}\n> Accept: */*\n"),
    );
    let s = fake(B64, 32, 40);
    add(
        "basic auth header",
        s.clone(),
        format!("Authorization: Basic {s}\n"),
    );
    let s = fake(ALNUM, 32, 41);
    add(
        "token in a url query",
        s.clone(),
        format!("GET https://api.example.com/v1/items?limit=10&access_token={s} 200\n"),
    );
    let s = format!("npm_{}", fake(ALNUM, 36, 42));
    add(
        "npm token (.npmrc)",
        s.clone(),
        format!("//registry.npmjs.org/:_authToken={s}\n"),
    );
    let s = format!("pypi-AgEIcHlwaS5vcmc{}", fake(URLSAFE, 60, 43));
    add(
        "pypi token",
        s.clone(),
        format!("[pypi]\n  username = __token__\n  password = {s}\n"),
    );
    let s = format!("dckr_pat_{}", fake(URLSAFE, 27, 44));
    add(
        "docker hub token",
        s.clone(),
        format!("echo {s} | docker login -u me --password-stdin\n"),
    );
    let s = format!("SG.{}.{}", fake(URLSAFE, 22, 45), fake(URLSAFE, 43, 46));
    add("sendgrid key", s.clone(), format!("sendgrid key {s}\n"));
    let s = format!("{}:AA{}", fake("0123456789", 10, 47), fake(URLSAFE, 33, 48));
    add(
        "telegram bot token",
        s.clone(),
        format!("bot = Bot(\"{s}\")\n"),
    );
    let s = format!("hvs.{}", fake(ALNUM, 90, 49));
    add(
        "vault token",
        s.clone(),
        format!("Key                  Value\ntoken                {s}\n"),
    );
    let s = format!("gsk_{}", fake(ALNUM, 52, 50));
    add("groq key", s.clone(), format!("GROQ_API_KEY: {s}\n"));
    let pem = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n",
        fake(B64, 70, 32),
        fake(B64, 70, 33)
    );
    add("openssh key cut off by truncation", fake(B64, 70, 33), pem);
    cases
}
