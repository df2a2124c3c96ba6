//! Tests of the `stop_on` language: a table of expressions and their values, parse errors
//! with positions, runtime errors, the limits, and properties (the parser and evaluator
//! never panic, whatever the input).

use std::sync::Arc;

use proptest::prelude::*;

use super::*;

const JSON: &str = r#"{"state": "MERGED", "mergedAt": "2026-01-02", "checks": [
  {"name": "build", "ok": true}, {"name": "test", "ok": false}], "count": 3, "ratio": 0.5,
  "labels": ["a", "b"], "empty": {}, "nothing": null}"#;

fn vars() -> Vars {
    Vars::new(JSON, 0, Some("previous"), true)
}

fn text_vars(output: &str, exit_code: i64, prev: Option<&str>, changed: bool) -> Vars {
    Vars::new(output, exit_code, prev, changed)
}

fn eval_with(src: &str, vars: &Vars) -> Result<Value, String> {
    let expr = Expression::parse(src).map_err(|e| format!("parse: {e}"))?;
    expr.evaluate(vars).map_err(|e| format!("eval: {e}"))
}

fn list(items: Vec<Value>) -> Value {
    Value::List(Arc::new(items))
}

fn s(text: &str) -> Value {
    Value::str(text)
}

#[test]
fn the_table() {
    use Value::{Bool, Float, Int};
    let v = vars();
    let cases: Vec<(&str, Value)> = vec![
        // The seed's examples.
        (r#"data["state"] == "MERGED""#, Bool(true)),
        (r#""error" in output"#, Bool(false)),
        ("exit_code != 0", Bool(false)),
        (r#"changed and "ready" in output.lower()"#, Bool(false)),
        (r#"data.get("mergedAt") is not None"#, Bool(true)),
        // Literals and truthiness.
        ("True", Bool(true)),
        ("false or null", Value::None),
        ("None is None", Bool(true)),
        ("1_000 + 0.5", Float(1000.5)),
        ("2e3", Float(2000.0)),
        (".5 + 1.", Float(1.5)),
        (r"'it\'s' + ' \x41\u00e9\n'", s("it's Aé\n")),
        (r#""a\qb""#, s("a\\qb")),
        ("[1, 2, 3,]", list(vec![Int(1), Int(2), Int(3)])),
        ("(1, 'x')", list(vec![Int(1), s("x")])),
        ("()", list(vec![])),
        // Arithmetic, Python style.
        ("7 / 2", Float(3.5)),
        ("-7 % 3", Int(2)),
        ("7 % -3", Int(-2)),
        ("-7.5 % 2", Float(0.5)),
        ("2 + 3 * 4 - -1", Int(15)),
        ("True + True", Int(2)),
        ("'ab' * 3", s("ababab")),
        ("2 * [0]", list(vec![Int(0), Int(0)])),
        ("'x' * -1", s("")),
        ("[1] + [2]", list(vec![Int(1), Int(2)])),
        // Comparisons.
        ("1 < 2 < 3", Bool(true)),
        ("1 < 3 < 2", Bool(false)),
        ("1 == 1.0 == True", Bool(true)),
        ("'abc' < 'abd'", Bool(true)),
        ("[1, 2] < [1, 3]", Bool(true)),
        ("1 is True", Bool(false)),
        ("'a' not in 'bcd'", Bool(true)),
        ("'labels' in data", Bool(true)),
        ("'b' in data['labels']", Bool(true)),
        ("3 in [1, 2, 3.0]", Bool(true)),
        ("not data['empty']", Bool(true)),
        ("data['nothing'] is None", Bool(true)),
        // Subscripts and slices.
        ("data['checks'][-1]['name']", s("test")),
        ("data['labels'][0:1]", list(vec![s("a")])),
        ("'hello'[1:-1]", s("ell")),
        ("'hello'[-1]", s("o")),
        ("'hello'[:100]", s("hello")),
        // Builtins.
        ("len(data['checks'])", Int(2)),
        ("len('héllo')", Int(5)),
        ("str(1.0) + str(None) + str([1, 'a'])", s("1.0None[1, 'a']")),
        ("str(1e20)", s("1e+20")),
        ("int('  42 ') + int(3.9) + int(True)", Int(46)),
        ("float('1.5') * 2", Float(3.0)),
        ("bool('') or bool([0])", Bool(true)),
        ("abs(-3) + abs(-0.5)", Float(3.5)),
        ("min(3, 1, 2) + max([4, 9, 2])", Int(10)),
        ("max('abc')", s("c")),
        ("sorted([3, 1, 2])", list(vec![Int(1), Int(2), Int(3)])),
        (
            "sorted([2, 1.5, True, 0])",
            list(vec![Int(0), Bool(true), Float(1.5), Int(2)]),
        ),
        ("len(sorted([float('nan'), 1, 0, float('nan'), 2]))", Int(5)),
        ("sorted('bca')", list(vec![s("a"), s("b"), s("c")])),
        ("sorted(data['empty'])", list(vec![])),
        ("any([0, '', None]) or all([])", Bool(true)),
        (
            "isinstance(data, dict) and isinstance(data['count'], (int, float))",
            Bool(true),
        ),
        ("isinstance(True, int)", Bool(true)),
        ("isinstance(data['ratio'], str)", Bool(false)),
        // Methods.
        ("'  Hi  '.strip().upper()", s("HI")),
        ("'xxhixx'.strip('x')", s("hi")),
        (
            "'a,b,,c'.split(',')",
            list(vec![s("a"), s("b"), s(""), s("c")]),
        ),
        ("' a  b '.split()", list(vec![s("a"), s("b")])),
        ("'a b c'.split(None, 1)", list(vec![s("a"), s("b c")])),
        ("'l1\\nl2'.splitlines()", list(vec![s("l1"), s("l2")])),
        ("'build ok'.startswith(('fail', 'build'))", Bool(true)),
        ("'report.txt'.endswith('.txt')", Bool(true)),
        ("'abcabc'.find('c') + 'abcabc'.count('b')", Int(4)),
        ("'aaa'.replace('a', 'bb')", s("bbbbbb")),
        ("output.contains('MERGED')", Bool(true)),
        ("data.get('missing', 'dflt')", s("dflt")),
        ("data['empty'].keys()", list(vec![])),
        ("len(data.values()) == len(data.items())", Bool(true)),
        (
            "data['labels'].index('b') + data['labels'].count('a')",
            Int(2),
        ),
        // Variables.
        ("prev_output == 'previous' and changed", Bool(true)),
        ("exit_code == 0", Bool(true)),
    ];
    let mut checked = 0;
    for (src, expected) in cases {
        let got = eval_with(src, &v).unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(got, expected, "{src}");
        assert_eq!(
            got.type_name(),
            expected.type_name(),
            "{src}: {got:?} vs {expected:?}"
        );
        checked += 1;
    }
    assert!(checked >= 40, "{checked}");
}

#[test]
fn output_and_prev_output_on_plain_text() {
    let v = text_vars("Deploy READY\n", 0, None, true);
    let t = |src: &str| eval_with(src, &v).unwrap().truthy();
    assert!(t(r#"changed and "ready" in output.lower()"#));
    assert!(t("prev_output is None and data is None"));
    assert!(t("output.strip().endswith('READY')"));
    let v = text_vars("[1, 2, 3]", 2, Some("[1, 2]"), true);
    assert!(
        eval_with("len(data) > 2 and exit_code >= 2", &v)
            .unwrap()
            .truthy()
    );
    let v = text_vars("42", 0, Some("41"), true);
    assert!(
        eval_with("data == 42 and int(prev_output) == 41", &v)
            .unwrap()
            .truthy()
    );
}

#[test]
fn parse_errors_name_the_problem_and_position() {
    let cases: &[(&str, usize, &str)] = &[
        ("foo == 1", 1, "unknown name 'foo'"),
        ("output == bar", 11, "unknown name 'bar'"),
        ("__import__('os')", 1, "unknown name '__import__'"),
        ("open('/etc/passwd')", 1, "unknown name 'open'"),
        ("exec('1')", 1, "unknown name 'exec'"),
        ("lambda: 1", 1, "unknown name 'lambda'"),
        (
            "output.__class__",
            8,
            "attribute or method '__class__' is not allowed",
        ),
        ("output.lower", 8, "must be called"),
        ("data.pop('x')", 6, "'pop' is not allowed"),
        ("output()", 7, "only builtins and methods can be called"),
        ("x = 1", 3, "'=' is not allowed"),
        ("x == 1 if output else 2", 1, "unknown name 'x'"),
        ("output if changed else 1", 8, "after a complete expression"),
        ("output = 1", 8, "'=' is not allowed"),
        ("2 ** 3", 3, "'**'"),
        ("7 // 2", 3, "'//'"),
        ("a && b", 3, "'&&'"),
        ("!changed", 1, "use 'not'"),
        ("{'a': 1}", 1, "dict and set literals"),
        ("'unterminated", 1, "unterminated string"),
        ("(1 + 2", 7, "expected ')'"),
        ("1 +", 4, "unexpected end"),
        ("", 1, "empty expression"),
        ("   ", 1, "empty expression"),
        ("1 2", 3, "after a complete expression"),
        ("len()", 4, "len() takes exactly 1 argument (0 given)"),
        ("len(output, output)", 4, "(2 given)"),
        ("output.replace('a')", 15, "takes exactly 2 arguments"),
        ("min()", 4, "at least 1"),
        ("str", 1, "must be called"),
        ("dict", 1, "only be used in isinstance"),
        ("isinstance(data, set)", 18, "isinstance() types"),
        ("sorted(data, reverse=True)", 21, "'=' is not allowed"),
        ("[output for x in output]", 9, "expected ']'"),
        ("output[1:2:3]", 11, "slice steps"),
        ("output[]", 7, "empty subscript"),
        ("not", 4, "unexpected end"),
        ("1 not 2", 3, "expected 'in' after 'not'"),
        ("99999999999999999999", 1, "integer literal too large"),
        ("1__0", 2, "invalid '_'"),
        ("12abc", 1, "invalid number literal"),
        ("f'x'", 1, "string prefixes"),
        ("output; 1", 7, "only one expression"),
        ("'\\x4'", 2, "invalid \\x escape"),
    ];
    for (src, position, reason) in cases {
        let e = Expression::parse(src).expect_err(src);
        assert!(e.reason.contains(reason), "{src}: {e}");
        assert_eq!(e.position, *position, "{src}: {e}");
        assert!(
            e.to_string()
                .starts_with(&format!("at position {position}:"))
        );
    }
}

#[test]
fn runtime_errors_are_errors_not_panics() {
    let v = vars();
    let cases: &[(&str, &str)] = &[
        ("data['missing']", "KeyError: key 'missing' not found"),
        ("data['labels'][5]", "list index out of range"),
        ("exit_code['x']", "'int' object is not subscriptable"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "modulo by zero"),
        (
            "'a' + 1",
            "unsupported operand type(s) for +: 'str' and 'int'",
        ),
        (
            "'a' < 1",
            "ordering not supported between instances of 'str' and 'int'",
        ),
        ("1 in 'abc'", "requires string as left operand"),
        ("'x' in None", "argument of type 'NoneType' is not iterable"),
        ("len(5)", "object of type 'int' has no len()"),
        ("int('x1')", "invalid literal for int()"),
        ("float('abc')", "could not convert string to float"),
        ("int(float('nan'))", "NaN"),
        ("max([])", "max() arg is an empty sequence"),
        ("sorted([1, 'a'])", "ordering not supported"),
        ("data.lower()", "'dict' object has no method 'lower'"),
        ("exit_code.get('x')", "'int' object has no method 'get'"),
        ("data['labels'].index('z')", "'z' is not in list"),
        ("9223372036854775807 + 1", "integer overflow"),
        ("-(-9223372036854775807 - 1)", "integer overflow"),
        ("'%d' % 1", "string formatting"),
        ("'a'.split('')", "empty separator"),
        ("output['x']", "string indices must be integers, not str"),
    ];
    for (src, expected) in cases {
        match eval_with(src, &v) {
            Err(e) => assert!(
                e.starts_with("eval: ") && e.contains(expected),
                "{src}: {e}"
            ),
            Ok(value) => panic!("{src}: expected an error, got {value:?}"),
        }
    }
}

#[test]
fn limits_hold() {
    let v = vars();
    // Growth is refused before anything is allocated.
    for src in [
        "'a' * 1000000000",
        "'ab' * 9223372036854775807",
        "[0] * 1000000000",
        "output * 100000",
        "(output * 1000).replace('', output)",
    ] {
        let e = eval_with(src, &v).unwrap_err();
        assert!(e.contains("too large"), "{src}: {e}");
    }
    // Just under the string limit works.
    assert_eq!(
        eval_with("len('a' * 1048576)", &v).unwrap(),
        Value::Int(1_048_576)
    );
    // Nesting and length.
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    assert!(
        Expression::parse(&deep)
            .unwrap_err()
            .reason
            .contains("nested too deeply")
    );
    let negations = format!("{}1", "-".repeat(40));
    assert!(Expression::parse(&negations).is_err());
    let shallow = format!("{}1{}", "(".repeat(10), ")".repeat(10));
    assert!(Expression::parse(&shallow).is_ok());
    let long = format!("output == '{}'", "x".repeat(MAX_EXPR_CHARS));
    let e = Expression::parse(&long).unwrap_err();
    assert!(e.reason.contains("the limit is 1000"), "{e}");
    // Work: many passes over a large string run out of budget instead of running long.
    let big = "y".repeat(1 << 20);
    let v = text_vars(&big, 0, Some(&big), false);
    let src = vec!["output == prev_output"; 25].join(" and ");
    let e = eval_with(&src, &v).unwrap_err();
    assert!(e.contains("work limit"), "{e}");
}

#[test]
fn json_data_keeps_types_and_order() {
    let v = text_vars(
        r#"{"b": 1, "a": [true, null, 2.5, 18446744073709551615]}"#,
        0,
        None,
        false,
    );
    assert_eq!(
        eval_with("list_keys", &v).unwrap_err(),
        "parse: at position 1: unknown name 'list_keys' (allowed: output, data, exit_code, \
         prev_output, changed, True, False, None, len, str, int, float, bool, abs, min, max, \
         any, all, sorted, isinstance)"
    );
    assert_eq!(
        eval_with("data.keys()", &v).unwrap(),
        list(vec![s("b"), s("a")])
    );
    assert_eq!(
        eval_with("str(data)", &v).unwrap(),
        s("{'b': 1, 'a': [True, None, 2.5, 1.8446744073709552e+19]}")
    );
    let v = text_vars("not json {", 0, None, false);
    assert_eq!(eval_with("data", &v).unwrap(), Value::None);
}

#[test]
fn float_and_string_reprs_match_python() {
    for (f, text) in [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5e-7, "-2.5e-07"),
        (f64::INFINITY, "inf"),
    ] {
        assert_eq!(float_repr(f), text);
    }
    assert_eq!(str_repr("it's"), "\"it's\"");
    assert_eq!(str_repr("a'b\"c\n"), "'a\\'b\"c\\n'");
}

/// Source text built from the language's own pieces, so most of it parses.
fn token_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("output"),
        Just("data"),
        Just("exit_code"),
        Just("prev_output"),
        Just("changed"),
        Just("None"),
        Just("True"),
        Just("0"),
        Just("-1"),
        Just("2.5"),
        Just("'a'"),
        Just("\"done\""),
        Just("["),
        Just("]"),
        Just("("),
        Just(")"),
        Just(","),
        Just(":"),
        Just("."),
        Just("+"),
        Just("-"),
        Just("*"),
        Just("/"),
        Just("%"),
        Just("=="),
        Just("<"),
        Just(">="),
        Just(" in "),
        Just(" not "),
        Just(" and "),
        Just(" or "),
        Just(" is "),
        Just("len("),
        Just("str("),
        Just("int("),
        Just("sorted("),
        Just("min("),
        Just("isinstance("),
        Just("dict"),
        Just(".get("),
        Just(".split("),
        Just(".lower()"),
        Just(".keys()"),
        Just("['state']"),
        Just("[0]"),
        Just("[1:]"),
    ];
    proptest::collection::vec(piece, 1..24).prop_map(|pieces| pieces.concat())
}

/// Complete, well-formed expressions (which may still fail at run time).
fn well_formed() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("output".to_string()),
        Just("data".to_string()),
        Just("exit_code".to_string()),
        Just("prev_output".to_string()),
        Just("changed".to_string()),
        Just("None".to_string()),
        (-1000i64..1000).prop_map(|i| i.to_string()),
        "[a-z ]{0,6}".prop_map(|s| format!("'{s}'")),
    ];
    leaf.prop_recursive(4, 32, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                inner.clone(),
                prop_oneof![
                    Just("+"),
                    Just("-"),
                    Just("*"),
                    Just("/"),
                    Just("%"),
                    Just("=="),
                    Just("<"),
                    Just(" in "),
                    Just(" and "),
                    Just(" or "),
                    Just(" is not ")
                ]
            )
                .prop_map(|(a, b, op)| format!("({a}{op}{b})")),
            inner.clone().prop_map(|a| format!("(not {a})")),
            inner.clone().prop_map(|a| format!("len({a})")),
            inner.clone().prop_map(|a| format!("str({a})")),
            inner.clone().prop_map(|a| format!("sorted({a})")),
            inner.clone().prop_map(|a| format!("{a}.split()")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a}[{b}]")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("[{a}, {b}]")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("max({a}, {b})")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_parser_never_panics_on_arbitrary_text(src in "\\PC{0,80}") {
        let _ = Expression::parse(&src);
    }

    #[test]
    fn the_parser_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let src = String::from_utf8_lossy(&bytes);
        let _ = Expression::parse(&src);
    }

    #[test]
    fn token_soup_parses_or_fails_cleanly_and_evaluates_without_panicking(
        src in token_soup(),
        output in "[ -~]{0,40}",
        exit_code in any::<i64>(),
    ) {
        if let Ok(expr) = Expression::parse(&src) {
            let _ = expr.evaluate(&Vars::new(&output, exit_code, Some("prev"), true));
            let _ = expr.evaluate(&Vars::new(JSON, exit_code, None, false));
        }
    }

    #[test]
    fn well_formed_expressions_parse_and_evaluate_to_a_value_or_an_error(
        src in well_formed(),
        output in prop_oneof![Just(JSON.to_string()), "[ -~]{0,20}"],
    ) {
        let expr = Expression::parse(&src);
        prop_assert!(expr.is_ok(), "{src}: {:?}", expr.err());
        if let Ok(expr) = expr {
            let _ = expr.evaluate(&Vars::new(&output, 0, None, true));
        }
    }

    #[test]
    fn sorting_never_panics_and_keeps_every_element(
        items in proptest::collection::vec(
            prop_oneof![
                Just("float('nan')".to_string()),
                (-5i64..5).prop_map(|i| i.to_string()),
                (-5i64..5).prop_map(|i| format!("{i}.5")),
                Just("True".to_string()),
            ],
            0..40,
        )
    ) {
        let src = format!("sorted([{}])", items.join(", "));
        let sorted = Expression::parse(&src).map(|e| e.evaluate(&vars()));
        match sorted {
            Ok(Ok(Value::List(out))) => prop_assert_eq!(out.len(), items.len()),
            other => prop_assert!(false, "{src}: {other:?}"),
        }
    }

    #[test]
    fn integers_round_trip_through_the_language(i in any::<i64>().prop_filter("literal", |i| *i != i64::MIN)) {
        let v = Expression::parse(&i.to_string()).map(|e| e.evaluate(&vars()));
        prop_assert_eq!(v.ok().and_then(Result::ok), Some(Value::Int(i)));
    }

    #[test]
    fn strings_round_trip_through_repr(text in "\\PC{0,20}") {
        let src = str_repr(&text);
        let v = Expression::parse(&src).map(|e| e.evaluate(&vars()));
        prop_assert_eq!(v.ok().and_then(Result::ok), Some(Value::str(&text)));
    }
}
