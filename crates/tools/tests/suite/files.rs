use std::path::Path;

use serde_json::json;
use turnstone_tools::{NoOutput, ToolContext};

use super::{prepare, run};

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    (dir, ctx)
}

fn write(dir: &Path, name: &str, content: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_numbers_lines_and_records_the_read() {
    let (dir, ctx) = ctx();
    write(dir.path(), "a.txt", b"alpha\nbeta\ngamma\n");
    let prepared = prepare("read_file", json!({"path": "a.txt"}), &ctx).unwrap();
    assert!(!prepared.needs_approval);
    let out = run("read_file", json!({"path": "a.txt"}), &ctx).await;
    assert!(!out.is_error);
    assert_eq!(out.content, "     1\talpha\n     2\tbeta\n     3\tgamma\n");
    let canonical = std::fs::canonicalize(dir.path().join("a.txt")).unwrap();
    assert!(ctx.read_files.lock().contains(&canonical));
}

#[tokio::test]
async fn read_file_offset_and_limit() {
    let (dir, ctx) = ctx();
    let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    write(dir.path(), "a.txt", text.as_bytes());
    let out = run(
        "read_file",
        json!({"path": "a.txt", "offset": 4, "limit": 2}),
        &ctx,
    )
    .await;
    assert_eq!(
        out.content,
        "     4\tl4\n     5\tl5\n\n[lines 4-5 of 10; continue with offset=6]"
    );
    assert!(prepare("read_file", json!({"path": "a.txt", "limit": 0}), &ctx).is_err());
}

#[tokio::test]
async fn read_file_errors_are_clear() {
    let (dir, ctx) = ctx();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let missing = run("read_file", json!({"path": "nope.txt"}), &ctx).await;
    assert!(missing.is_error);
    assert_eq!(missing.content, "Error: file not found: nope.txt");
    let directory = run("read_file", json!({"path": "sub/.."}), &ctx).await;
    assert!(directory.is_error);
    assert!(
        directory.content.contains("is a directory"),
        "{}",
        directory.content
    );
    write(dir.path(), "blob.bin", b"\x7fELF\x00\x01\x02garbage");
    let binary = run("read_file", json!({"path": "blob.bin"}), &ctx).await;
    assert!(binary.is_error);
    assert!(binary.content.contains("binary"), "{}", binary.content);
    assert!(
        ctx.read_files.lock().is_empty(),
        "failed reads are not recorded"
    );
}

/// A valid 2x1 RGB PNG (70 bytes), and its standard base64.
const PNG_2X1: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x7b, 0x40, 0xe8,
    0xdd, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0x00, 0x04,
    0xff, 0x01, 0x07, 0x00, 0x01, 0xff, 0xe2, 0x23, 0x9e, 0x59, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
const PNG_2X1_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn read_file_attaches_an_image_found_by_its_content_with_a_description() {
    let (dir, ctx) = ctx();
    // The name says nothing: the magic bytes decide.
    write(dir.path(), "screenshot.dat", PNG_2X1);
    let out = run("read_file", json!({"path": "screenshot.dat"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        out.content,
        "[image: screenshot.dat, PNG, 2x1 pixels, 70 bytes]"
    );
    assert_eq!(out.images.len(), 1);
    assert_eq!(out.images[0].media_type, "image/png");
    assert_eq!(out.images[0].data, PNG_2X1_BASE64);
    let canonical = std::fs::canonicalize(dir.path().join("screenshot.dat")).unwrap();
    assert!(ctx.read_files.lock().contains(&canonical));
    // Text output of other files carries no image.
    write(dir.path(), "a.txt", b"x\n");
    assert!(
        run("read_file", json!({"path": "a.txt"}), &ctx)
            .await
            .images
            .is_empty()
    );
}

#[tokio::test]
async fn read_file_knows_jpeg_gif_and_webp_and_describes_formats_models_do_not_take() {
    let (dir, ctx) = ctx();
    // SOI, SOF0 (height 3, width 4), EOI.
    let jpeg = [
        0xff, 0xd8, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x03, 0x00, 0x04, 0x03, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0xff, 0xd9,
    ];
    write(dir.path(), "p.jpg", &jpeg);
    let out = run("read_file", json!({"path": "p.jpg"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("JPEG, 4x3 pixels"), "{}", out.content);
    assert_eq!(out.images[0].media_type, "image/jpeg");
    let mut gif = b"GIF89a\x05\x00\x06\x00".to_vec();
    gif.extend_from_slice(&[0u8; 8]);
    gif.push(0x3b);
    write(dir.path(), "p.gif", &gif);
    let out = run("read_file", json!({"path": "p.gif"}), &ctx).await;
    assert!(out.content.contains("GIF, 5x6 pixels"), "{}", out.content);
    assert_eq!(out.images[0].media_type, "image/gif");
    // VP8X: RIFF size 22 (the 30-byte file minus 8), canvas 100x50.
    let mut webp = b"RIFF\x16\x00\x00\x00WEBPVP8X".to_vec();
    webp.extend_from_slice(&[0u8; 8]);
    webp.extend_from_slice(&[99, 0, 0, 49, 0, 0]);
    write(dir.path(), "p.webp", &webp);
    let out = run("read_file", json!({"path": "p.webp"}), &ctx).await;
    assert!(
        out.content.contains("WebP, 100x50 pixels"),
        "{}",
        out.content
    );
    assert_eq!(out.images[0].media_type, "image/webp");
    // BMP: described, never attached.
    let mut bmp = b"BM".to_vec();
    bmp.extend_from_slice(&[0u8; 12]);
    bmp.extend_from_slice(&40u32.to_le_bytes());
    bmp.extend_from_slice(&7i32.to_le_bytes());
    bmp.extend_from_slice(&8i32.to_le_bytes());
    bmp.extend_from_slice(&[0u8; 16]);
    write(dir.path(), "p.bmp", &bmp);
    let out = run("read_file", json!({"path": "p.bmp"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("BMP, 7x8 pixels"), "{}", out.content);
    assert!(
        out.content.contains("not a format models accept"),
        "{}",
        out.content
    );
    assert!(out.images.is_empty());
}

#[tokio::test]
async fn read_file_refuses_fake_truncated_and_oversized_images_clearly() {
    let (dir, ctx) = ctx();
    write(dir.path(), "notes.png", b"just some text, not an image\n");
    let out = run("read_file", json!({"path": "notes.png"}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Error: notes.png is named like an image (.png) but is not a PNG, JPEG, GIF or WebP \
         image: its first bytes match none of them"
    );
    // Cut inside the pixel data: the header reads, the end is gone.
    write(dir.path(), "cut.png", &PNG_2X1[..50]);
    let out = run("read_file", json!({"path": "cut.png"}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Error: cut.png is a truncated or corrupt PNG image (50 bytes): its header or its end \
         is missing"
    );
    assert!(out.images.is_empty());
    // Cut inside the header: no dimensions.
    write(dir.path(), "stub.png", &PNG_2X1[..12]);
    let out = run("read_file", json!({"path": "stub.png"}), &ctx).await;
    assert!(
        out.is_error && out.content.contains("truncated"),
        "{}",
        out.content
    );
    // Over the default limit (5 MiB).
    let mut big = b"GIF89a".to_vec();
    big.resize(turnstone_tools::DEFAULT_MAX_IMAGE_BYTES as usize + 1, 0);
    write(dir.path(), "big.gif", &big);
    let out = run("read_file", json!({"path": "big.gif"}), &ctx).await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        format!(
            "Error: big.gif is a GIF image of {} bytes, over the {}-byte image limit \
             (tools.max_image_bytes)",
            big.len(),
            turnstone_tools::DEFAULT_MAX_IMAGE_BYTES
        )
    );
}

#[tokio::test]
async fn read_file_image_limit_is_configurable() {
    let (dir, ctx) = ctx();
    write(dir.path(), "pic.png", PNG_2X1);
    let registry =
        turnstone_tools::ToolRegistry::with_builtin_options(&turnstone_tools::BuiltinOptions {
            max_image_bytes: 69,
            ..turnstone_tools::BuiltinOptions::default()
        })
        .unwrap();
    let tool = registry.get("read_file").unwrap();
    let prepared = tool.prepare(json!({"path": "pic.png"}), &ctx).unwrap();
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("over the 69-byte image limit"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn read_file_output_is_truncated_to_the_context_limit() {
    let (dir, mut ctx) = ctx();
    ctx.truncation_limit = 64;
    let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    write(dir.path(), "long.txt", text.as_bytes());
    let out = run("read_file", json!({"path": "long.txt"}), &ctx).await;
    assert!(
        out.content.contains("output exceeded 64 char limit"),
        "{}",
        out.content
    );
    assert!(out.content.ends_with("line 100\n"));
}

// ---------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_creates_parents_and_labels_approvals() {
    let (dir, ctx) = ctx();
    let prepared = prepare(
        "write_file",
        json!({"path": "new/deep/f.txt", "content": "hi\n"}),
        &ctx,
    )
    .unwrap();
    assert!(prepared.needs_approval);
    assert_eq!(prepared.approval_label, "write_file");
    assert_eq!(prepared.preview, "hi");
    let out = run(
        "write_file",
        json!({"path": "new/deep/f.txt", "content": "hi\n"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new/deep/f.txt")).unwrap(),
        "hi\n"
    );

    write(dir.path(), "old.txt", b"one\ntwo\n");
    let unread = prepare(
        "write_file",
        json!({"path": "old.txt", "content": "one\n2\n"}),
        &ctx,
    )
    .unwrap();
    assert_eq!(unread.approval_label, "overwrite_file");
    assert!(
        unread.preview.contains("-two") && unread.preview.contains("+2"),
        "{}",
        unread.preview
    );
    run("read_file", json!({"path": "old.txt"}), &ctx).await;
    let read = prepare(
        "write_file",
        json!({"path": "old.txt", "content": "x"}),
        &ctx,
    )
    .unwrap();
    assert_eq!(read.approval_label, "write_file");
    let append = prepare(
        "write_file",
        json!({"path": "old.txt", "content": "x", "mode": "append"}),
        &ctx,
    )
    .unwrap();
    assert_eq!(append.approval_label, "append_file");
}

#[tokio::test]
async fn write_file_append_and_errors() {
    let (dir, ctx) = ctx();
    write(dir.path(), "log.txt", b"a\n");
    let out = run(
        "write_file",
        json!({"path": "log.txt", "content": "b\n", "mode": "append"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("log.txt")).unwrap(),
        "a\nb\n"
    );
    assert!(
        prepare(
            "write_file",
            json!({"path": "log.txt", "content": "x", "mode": "insert"}),
            &ctx
        )
        .is_err()
    );
    assert!(prepare("write_file", json!({"path": "log.txt"}), &ctx).is_err());
    std::fs::create_dir(dir.path().join("d")).unwrap();
    assert!(
        prepare("write_file", json!({"path": "d", "content": "x"}), &ctx)
            .unwrap_err()
            .contains("directory")
    );
}

// ---------------------------------------------------------------- edit_file

async fn read(ctx: &ToolContext, path: &str) {
    let out = run("read_file", json!({"path": path}), ctx).await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test]
async fn edit_requires_a_prior_read() {
    let (dir, ctx) = ctx();
    write(dir.path(), "f.rs", b"fn main() {}\n");
    let err = prepare(
        "edit_file",
        json!({"path": "f.rs", "old_string": "main", "new_string": "start"}),
        &ctx,
    )
    .unwrap_err();
    assert!(err.contains("read_file"), "{err}");
    read(&ctx, "f.rs").await;
    let prepared = prepare(
        "edit_file",
        json!({"path": "f.rs", "old_string": "main", "new_string": "start"}),
        &ctx,
    )
    .unwrap();
    assert_eq!(prepared.approval_label, "edit_file");
    assert!(prepared.needs_approval);
    assert!(
        prepared.preview.contains("-fn main() {}") && prepared.preview.contains("+fn start() {}")
    );
}

#[tokio::test]
async fn edit_replaces_exactly_once() {
    let (dir, ctx) = ctx();
    write(dir.path(), "f.txt", b"red green blue\n");
    read(&ctx, "f.txt").await;
    let out = run(
        "edit_file",
        json!({"path": "f.txt", "old_string": "green", "new_string": "GREEN"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("line 1"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "red GREEN blue\n"
    );
}

#[tokio::test]
async fn edit_not_found_and_ambiguous() {
    let (dir, ctx) = ctx();
    write(dir.path(), "f.txt", b"x\ny\nx\n");
    read(&ctx, "f.txt").await;
    let missing = prepare(
        "edit_file",
        json!({"path": "f.txt", "old_string": "zzz", "new_string": "q"}),
        &ctx,
    );
    assert!(missing.unwrap_err().contains("not found"));
    let ambiguous = prepare(
        "edit_file",
        json!({"path": "f.txt", "old_string": "x", "new_string": "q"}),
        &ctx,
    );
    assert!(ambiguous.unwrap_err().contains("occurs 2 times"));
    let near = run(
        "edit_file",
        json!({"path": "f.txt", "old_string": "x", "new_string": "q", "near_line": 3}),
        &ctx,
    )
    .await;
    assert!(!near.is_error, "{}", near.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "x\ny\nq\n"
    );
    let all = run(
        "edit_file",
        json!({"path": "f.txt", "old_string": "\n", "new_string": ";", "replace_all": true}),
        &ctx,
    )
    .await;
    assert!(
        all.content.contains("replaced 3 occurrences"),
        "{}",
        all.content
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "x;y;q;"
    );
}

#[tokio::test]
async fn edit_batch_is_all_or_nothing() {
    let (dir, ctx) = ctx();
    let original = "one\ntwo\nthree\n";
    write(dir.path(), "f.txt", original.as_bytes());
    read(&ctx, "f.txt").await;
    let tool = super::registry().get("edit_file").unwrap();
    let good = json!({"path": "f.txt", "edits": [
        {"old_string": "one", "new_string": "1"},
        {"old_string": "three", "new_string": "3"}
    ]});
    let prepared = tool.prepare(good, &ctx).unwrap();
    // The file changes between approval and execution: one edit no longer applies.
    write(dir.path(), "f.txt", b"one\ntwo\nTHREE\n");
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("edit #2") && out.content.contains("no edits were applied"),
        "{}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "one\ntwo\nTHREE\n"
    );

    let out = run(
        "edit_file",
        json!({"path": "f.txt", "edits": [
            {"old_string": "THREE", "new_string": "3"},
            {"old_string": "one", "new_string": "1"}
        ]}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "1\ntwo\n3\n"
    );
    let bad = prepare(
        "edit_file",
        json!({"path": "f.txt", "edits": [
            {"old_string": "two", "new_string": "2"},
            {"old_string": "missing", "new_string": "x"}
        ]}),
        &ctx,
    );
    assert!(bad.unwrap_err().contains("edit #2"));
}

#[tokio::test]
async fn edit_keeps_permissions_and_leaves_no_temp_files() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, ctx) = ctx();
    write(dir.path(), "run.sh", b"echo a\n");
    let path = dir.path().join("run.sh");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    read(&ctx, "run.sh").await;
    let out = run(
        "edit_file",
        json!({"path": "run.sh", "old_string": "a", "new_string": "b"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o755
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["run.sh"]);
}

#[tokio::test]
async fn edit_missing_file_and_directory() {
    let (dir, ctx) = ctx();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let missing = prepare(
        "edit_file",
        json!({"path": "nope", "old_string": "a", "new_string": "b"}),
        &ctx,
    );
    assert!(missing.unwrap_err().contains("not found"));
    let directory = prepare(
        "edit_file",
        json!({"path": "sub", "old_string": "a", "new_string": "b"}),
        &ctx,
    );
    assert!(directory.unwrap_err().contains("directory"));
}

// ---------------------------------------------------------------- diff_file

#[tokio::test]
async fn diff_two_files_and_file_against_content() {
    let (dir, ctx) = ctx();
    write(dir.path(), "a.txt", b"1\n2\n3\n");
    write(dir.path(), "b.txt", b"1\ntwo\n3\n");
    let prepared = prepare(
        "diff_file",
        json!({"path_a": "a.txt", "path_b": "b.txt"}),
        &ctx,
    )
    .unwrap();
    assert!(!prepared.needs_approval);
    let out = run(
        "diff_file",
        json!({"path_a": "a.txt", "path_b": "b.txt"}),
        &ctx,
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.starts_with("--- a.txt\n+++ b.txt\n"),
        "{}",
        out.content
    );
    assert!(out.content.contains("-2\n+two\n"));
    let against = run(
        "diff_file",
        json!({"path_a": "a.txt", "content_b": "1\n2\n3\n"}),
        &ctx,
    )
    .await;
    assert!(
        against.content.starts_with("No differences"),
        "{}",
        against.content
    );
    // diff counts as a read for edit_file.
    assert!(
        prepare(
            "edit_file",
            json!({"path": "a.txt", "old_string": "2", "new_string": "x"}),
            &ctx
        )
        .is_ok()
    );
}

#[tokio::test]
async fn diff_argument_and_file_errors() {
    let (dir, ctx) = ctx();
    write(dir.path(), "a.txt", b"x\n");
    write(dir.path(), "bin", b"\x00\x01");
    assert!(prepare("diff_file", json!({"path_a": "a.txt"}), &ctx).is_err());
    assert!(
        prepare(
            "diff_file",
            json!({"path_a": "a.txt", "path_b": "a.txt", "content_b": "x"}),
            &ctx
        )
        .is_err()
    );
    let missing = run(
        "diff_file",
        json!({"path_a": "a.txt", "path_b": "zz.txt"}),
        &ctx,
    )
    .await;
    assert!(missing.is_error && missing.content.contains("not found"));
    let binary = run("diff_file", json!({"path_a": "bin", "content_b": ""}), &ctx).await;
    assert!(binary.is_error && binary.content.contains("binary"));
    let ctx_lines = prepare(
        "diff_file",
        json!({"path_a": "a.txt", "content_b": "", "context_lines": 99}),
        &ctx,
    )
    .unwrap();
    assert_eq!(ctx_lines.args["context_lines"], 20);
}
