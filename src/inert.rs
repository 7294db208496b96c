//! Text from others, made safe to print on a terminal. Holder names and revoke reasons are any
//! string (the schema bounds only their length), and a server the CLI is pointed at may say
//! anything in its errors: printed raw, an escape sequence could recolour, retitle or clear the
//! reader's terminal, a newline or line separator fake a line, a bidi or invisible character make
//! one name look like another. Everything the CLI prints that it did not write itself goes
//! through here.

/// Whether a terminal would act on `c` (or a reader be misled by it) rather than show it: C0, DEL
/// and C1 controls, bidi controls, line and paragraph separators, zero-width and other invisible
/// format characters, and tag characters.
fn acts(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{ad}' | '\u{61c}' | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0000}'..='\u{e007f}')
}

/// `text` with every character a terminal would act on written out as `\u{..}` (and `\` as `\\`,
/// so that a name cannot pretend to be an escaped one).
pub fn inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if acts(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// JSON text (as serde_json writes it: control characters already escaped inside strings) with
/// every other character a terminal would act on written as a JSON `\u` escape: the same JSON
/// value, safe to print on a terminal. Those characters only occur inside strings.
pub fn inert_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if acts(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "a\u{1b}]0;t\u{7}\u{1b}[2J\u{9b}31m\u{202e}\u{61c}\u{2028}\u{feff}\u{200b}\u{e0041}\u{7f}\nb\\";

    #[test]
    fn nothing_a_terminal_acts_on_is_left() {
        let shown = inert(HOSTILE);
        assert!(shown.chars().all(|c| !acts(c)), "{shown:?}");
        assert_eq!(
            shown,
            r"a\u{1b}]0;t\u{7}\u{1b}[2J\u{9b}31m\u{202e}\u{61c}\u{2028}\u{feff}\u{200b}\u{e0041}\u{7f}\u{a}b\\"
        );
        assert_eq!(
            inert("worker-7 ü 中"),
            "worker-7 ü 中",
            "ordinary text is as it was"
        );
    }

    #[test]
    fn json_stays_the_same_value() {
        let value = serde_json::json!({"holder": HOSTILE, "n": 1});
        let shown = inert_json(&value.to_string());
        assert!(shown.chars().all(|c| !acts(c)), "{shown:?}");
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
    }
}
