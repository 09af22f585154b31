//! Engine acceptance counters (`--spec-metrics FILE`), for traces whose markers do not say
//! what each step accepted (vLLM's give the tokens scheduled, not those accepted).
//!
//! Read, in whichever form the file holds (the first that matches):
//! - vLLM's log lines `SpecDecoding metrics: Mean acceptance length: …, Accepted: N tokens,
//!   Drafted: M tokens, Per-position acceptance rate: a, b, …` (each line covers the drafts
//!   since the previous one: they are added up);
//! - the `Speculative Decoding` block of `vllm bench serve` (`Acceptance length`, `Drafts`,
//!   `Draft tokens`, `Accepted tokens`, `Position j:` percentages);
//! - vLLM's Prometheus text (`vllm:spec_decode_num_drafts_total`, `…num_draft_tokens_total`,
//!   `…num_accepted_tokens_total`, `…num_accepted_tokens_per_pos_total{position="j"}`,
//!   summed over their label sets);
//! - SGLang's `Decode batch.` log lines (`accept len: X`: the mean over the lines, as SGLang
//!   gives no counts);
//! - llama.cpp's speculative examples' verbose per-step lines (`accepted A/D draft tokens`,
//!   one per verify: per-step counts, kept in order in `per_step_accepted`), or else its
//!   `statistics draft: …` line (`#calls(b,g,a)`, `#gen tokens`, `#acc tokens`, `#mean acc
//!   len`, `#acc rate/pos = (…)`).
//!
//! vLLM's per-position rates are the share of drafts whose first j+1 candidates were all
//! accepted, the definition this report uses; its acceptance length counts the bonus token,
//! as ours does.

use serde::Serialize;

/// Which form the counters came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricsFormat {
    VllmLog,
    VllmBenchServe,
    VllmPrometheus,
    SglangLog,
    LlamacppLog,
    LlamacppStats,
}

impl MetricsFormat {
    pub fn describe(self) -> &'static str {
        match self {
            Self::VllmLog => "vLLM's SpecDecoding log lines",
            Self::VllmBenchServe => "vllm bench serve's Speculative Decoding block",
            Self::VllmPrometheus => "vLLM's Prometheus counters",
            Self::SglangLog => "SGLang's decode-batch log lines (accept len)",
            Self::LlamacppLog => "llama.cpp's per-step `accepted A/D draft tokens` log lines",
            Self::LlamacppStats => "llama.cpp's speculative `statistics` line",
        }
    }
}

/// Acceptance as an engine counted it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecMetrics {
    pub format: MetricsFormat,
    /// Verify steps (drafts) counted, when the engine says.
    pub drafts: Option<f64>,
    pub draft_tokens: Option<f64>,
    pub accepted_tokens: Option<f64>,
    /// Tokens per step including the bonus token.
    pub acceptance_length: f64,
    /// Per draft position, the share of drafts that accepted it (and every earlier one).
    pub per_position: Vec<f64>,
    /// Candidates each verify accepted, in the run's order, when the engine logs every step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_step_accepted: Option<Vec<u32>>,
}

impl SpecMetrics {
    /// Accepted over drafted candidates, when the engine counted both.
    pub fn acceptance_rate(&self) -> Option<f64> {
        match (self.accepted_tokens, self.draft_tokens) {
            (Some(a), Some(d)) if d > 0.0 => Some(a / d),
            _ => None,
        }
    }
}

/// Reads the counters `text` holds; an error names what was looked for.
pub fn parse(text: &str) -> Result<SpecMetrics, String> {
    let m = vllm_log(text)
        .or_else(|| bench_serve(text))
        .or_else(|| prometheus(text))
        .or_else(|| sglang_log(text))
        .or_else(|| llamacpp_log(text))
        .or_else(|| llamacpp_stats(text))
        .ok_or_else(|| {
            "no speculative-decoding counters found (looked for vLLM's `SpecDecoding metrics:` \
             log lines, `vllm bench serve` output, vLLM's `vllm:spec_decode_*` Prometheus \
             counters, SGLang's `accept len:` log lines and llama.cpp's verbose `accepted A/D \
             draft tokens` lines)"
                .to_owned()
        })?;
    // A step produces at least the target's own token: a length below 1 (or not a number)
    // would divide the step into nothing.
    if !(m.acceptance_length.is_finite() && m.acceptance_length >= 1.0) {
        return Err(format!(
            "{}: acceptance length {} is not a number of at least 1",
            m.format.describe(),
            m.acceptance_length
        ));
    }
    Ok(m)
}

/// The number after `key` in `line` (up to the next `,` or whitespace-delimited word).
fn number_after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == '+'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok().filter(|v: &f64| v.is_finite())
}

fn vllm_log(text: &str) -> Option<SpecMetrics> {
    let (mut drafts, mut drafted, mut accepted) = (0.0, 0.0, 0.0);
    let mut pos: Vec<f64> = Vec::new();
    let mut any = false;
    for line in text.lines().filter(|l| l.contains("SpecDecoding metrics:")) {
        let (Some(a), Some(d)) = (
            number_after(line, "Accepted:"),
            number_after(line, "Drafted:"),
        ) else {
            continue;
        };
        let rates: Vec<f64> = line
            .split("Per-position acceptance rate:")
            .nth(1)
            .map(|r| {
                r.split(',')
                    .map_while(|x| x.trim().parse::<f64>().ok())
                    .collect()
            })
            .unwrap_or_default();
        if rates.is_empty() {
            continue;
        }
        // Each line's drafts: its drafted tokens over the positions (every draft proposes k).
        let n = d / rates.len() as f64;
        if pos.len() < rates.len() {
            pos.resize(rates.len(), 0.0);
        }
        for (p, r) in pos.iter_mut().zip(&rates) {
            *p += r * n;
        }
        drafts += n;
        drafted += d;
        accepted += a;
        any = true;
    }
    (any && drafts > 0.0).then(|| SpecMetrics {
        format: MetricsFormat::VllmLog,
        drafts: Some(drafts),
        draft_tokens: Some(drafted),
        accepted_tokens: Some(accepted),
        acceptance_length: 1.0 + accepted / drafts,
        per_position: pos.iter().map(|p| p / drafts).collect(),
        per_step_accepted: None,
    })
}

fn bench_serve(text: &str) -> Option<SpecMetrics> {
    let block = &text[text.find("Speculative Decoding")?..];
    let field = |key: &str| {
        block
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .and_then(|l| number_after(l, ":"))
    };
    let length = field("Acceptance length")?;
    let mut per_position = Vec::new();
    for l in block.lines() {
        let t = l.trim_start();
        if let Some(rest) = t.strip_prefix("Position ") {
            let Some((j, v)) = rest.split_once(':') else {
                continue;
            };
            let (Ok(j), Ok(v)) = (j.trim().parse::<usize>(), v.trim().parse::<f64>()) else {
                continue;
            };
            if j != per_position.len() {
                break;
            }
            per_position.push(v / 100.0);
        } else if t.starts_with("====") {
            break;
        }
    }
    Some(SpecMetrics {
        format: MetricsFormat::VllmBenchServe,
        drafts: field("Drafts"),
        draft_tokens: field("Draft tokens"),
        accepted_tokens: field("Accepted tokens"),
        acceptance_length: length,
        per_position,
        per_step_accepted: None,
    })
}

fn prometheus(text: &str) -> Option<SpecMetrics> {
    let (mut drafts, mut drafted, mut accepted) = (None::<f64>, None::<f64>, None::<f64>);
    let mut pos: Vec<f64> = Vec::new();
    let add = |slot: &mut Option<f64>, v: f64| *slot = Some(slot.unwrap_or(0.0) + v);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || !line.starts_with("vllm:spec_decode_") {
            continue;
        }
        let (name, labels) = match line.find('{') {
            Some(i) => {
                let j = line.rfind('}').filter(|&j| j >= i).unwrap_or(i);
                (&line[..i], &line[i..j])
            }
            None => (line.split_whitespace().next().unwrap_or(""), ""),
        };
        let Some(v) = line
            .rsplit_once([' ', '}'])
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
        else {
            continue;
        };
        match name {
            "vllm:spec_decode_num_drafts_total" => add(&mut drafts, v),
            "vllm:spec_decode_num_draft_tokens_total" => add(&mut drafted, v),
            "vllm:spec_decode_num_accepted_tokens_total" => add(&mut accepted, v),
            "vllm:spec_decode_num_accepted_tokens_per_pos_total" => {
                let Some(j) = labels
                    .split("position=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .and_then(|j| j.parse::<usize>().ok())
                    .filter(|&j| j < 1024)
                else {
                    continue;
                };
                if pos.len() <= j {
                    pos.resize(j + 1, 0.0);
                }
                pos[j] += v;
            }
            _ => {}
        }
    }
    let (d, a) = (drafts?, accepted?);
    (d > 0.0).then(|| SpecMetrics {
        format: MetricsFormat::VllmPrometheus,
        drafts: Some(d),
        draft_tokens: drafted,
        accepted_tokens: Some(a),
        acceptance_length: 1.0 + a / d,
        per_position: pos.iter().map(|p| p / d).collect(),
        per_step_accepted: None,
    })
}

fn sglang_log(text: &str) -> Option<SpecMetrics> {
    let lens: Vec<f64> = text
        .lines()
        .filter(|l| l.contains("Decode batch"))
        .filter_map(|l| number_after(l, "accept len:"))
        .collect();
    (!lens.is_empty()).then(|| SpecMetrics {
        format: MetricsFormat::SglangLog,
        drafts: None,
        draft_tokens: None,
        accepted_tokens: None,
        acceptance_length: lens.iter().sum::<f64>() / lens.len() as f64,
        per_position: Vec::new(),
        per_step_accepted: None,
    })
}

/// Most draft positions a llama.cpp line may claim (its `--draft-max` is far below).
const MAX_DRAFT: u32 = 1024;

/// llama.cpp's `accepted A/D draft tokens` lines (speculative-simple and speculative print
/// one per verify with verbose logging): D drafted, A of them accepted, in order.
fn llamacpp_log(text: &str) -> Option<SpecMetrics> {
    let mut steps: Vec<(u32, u32)> = Vec::new();
    for line in text.lines() {
        let Some(at) = line.find("accepted ") else {
            continue;
        };
        let rest = &line[at + "accepted ".len()..];
        let Some((counts, tail)) = rest.split_once(' ') else {
            continue;
        };
        if !tail.starts_with("draft tokens") {
            continue;
        }
        let Some((a, d)) = counts.split_once('/') else {
            continue;
        };
        let (Ok(a), Ok(d)) = (a.parse::<u32>(), d.parse::<u32>()) else {
            continue;
        };
        if a > d || d > MAX_DRAFT {
            continue;
        }
        steps.push((a, d));
    }
    if steps.is_empty() {
        return None;
    }
    let n = steps.len() as f64;
    let drafted: u32 = steps.iter().map(|s| s.1).sum();
    let accepted: u32 = steps.iter().map(|s| s.0).sum();
    let k = steps.iter().map(|s| s.1).max().unwrap_or(0) as usize;
    let per_position = (0..k)
        .map(|j| steps.iter().filter(|s| s.0 as usize > j).count() as f64 / n)
        .collect();
    Some(SpecMetrics {
        format: MetricsFormat::LlamacppLog,
        drafts: Some(n),
        draft_tokens: Some(f64::from(drafted)),
        accepted_tokens: Some(f64::from(accepted)),
        acceptance_length: 1.0 + f64::from(accepted) / n,
        per_position,
        per_step_accepted: Some(steps.iter().map(|s| s.0).collect()),
    })
}

/// llama.cpp's `statistics draft: #calls(b,g,a) = B G A, …, #gen tokens = D, #acc tokens =
/// N, #mean acc len = L, #acc rate/pos = (p1, p2, …)` (its rate at position j: accept calls
/// that accepted position j over all accept calls; ours when every draft proposes k).
fn llamacpp_stats(text: &str) -> Option<SpecMetrics> {
    let line = text
        .lines()
        .find(|l| l.contains("statistics") && l.contains("#calls(b,g,a)"))?;
    let calls = &line[line.find("#calls(b,g,a) =")? + "#calls(b,g,a) =".len()..];
    let accept_calls: f64 = calls
        .split_whitespace()
        .nth(2)?
        .trim_end_matches(',')
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)?;
    let per_position = line
        .split("#acc rate/pos = (")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .map(|r| {
            r.split(',')
                .map_while(|x| x.trim().parse::<f64>().ok())
                .take(MAX_DRAFT as usize)
                .collect()
        })
        .unwrap_or_default();
    let accepted = number_after(line, "#acc tokens =");
    Some(SpecMetrics {
        format: MetricsFormat::LlamacppStats,
        drafts: Some(accept_calls),
        draft_tokens: number_after(line, "#gen tokens ="),
        accepted_tokens: accepted,
        acceptance_length: number_after(line, "#mean acc len =")
            .or_else(|| accepted.map(|a| 1.0 + a / accept_calls))?,
        per_position,
        per_step_accepted: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_log_lines_add_up() {
        let text = "INFO 01-25 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 3.00, \
            Accepted throughput: 10.00 tokens/s, Drafted throughput: 20.00 tokens/s, Accepted: 8 tokens, \
            Drafted: 16 tokens, Per-position acceptance rate: 0.750, 0.500, 0.500, 0.250, Avg Draft acceptance rate: 50.0%\n\
            INFO SpecDecoding metrics: Mean acceptance length: 5.00, Accepted throughput: 1.00 tokens/s, \
            Drafted throughput: 1.00 tokens/s, Accepted: 4 tokens, Drafted: 4 tokens, \
            Per-position acceptance rate: 1.000, 1.000, 1.000, 1.000, Avg Draft acceptance rate: 100.0%\n";
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::VllmLog);
        // 4 + 1 drafts, 12 accepted: 1 + 12/5.
        assert!((m.acceptance_length - 3.4).abs() < 1e-12);
        assert!((m.per_position[0] - 0.8).abs() < 1e-12);
        assert!((m.acceptance_rate().unwrap_or(0.0) - 0.6).abs() < 1e-12);
    }

    #[test]
    fn bench_serve_block() {
        let text = "---------------Speculative Decoding---------------\n\
            Acceptance rate (%):                     50.00\n\
            Acceptance length:                       2.50\n\
            Drafts:                                  4\n\
            Draft tokens:                            12\n\
            Accepted tokens:                         6\n\
            Per-position acceptance (%):\n\
              Position 0:                            75.00\n\
              Position 1:                            50.00\n\
              Position 2:                            25.00\n\
            ==================================================\n";
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::VllmBenchServe);
        assert!((m.acceptance_length - 2.5).abs() < 1e-12);
        assert_eq!(m.per_position, vec![0.75, 0.5, 0.25]);
        assert_eq!(
            (m.drafts, m.draft_tokens, m.accepted_tokens),
            (Some(4.0), Some(12.0), Some(6.0))
        );
    }

    #[test]
    fn prometheus_counters_sum_over_labels() {
        let text = "# HELP vllm:spec_decode_num_drafts_total x\n\
            vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 10.0\n\
            vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 40.0\n\
            vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 20.0\n\
            vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 8.0\n\
            vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 6.0\n";
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::VllmPrometheus);
        assert!((m.acceptance_length - 3.0).abs() < 1e-12);
        assert_eq!(m.per_position, vec![0.8, 0.6]);
    }

    /// Hostile text: misplaced braces, cut lines, huge or odd numbers, other scripts. No
    /// panic, and nothing is read from lines that do not hold the counters.
    #[test]
    fn hostile_text_never_panics() {
        let lines = [
            "vllm:spec_decode_num_drafts_total} 1 {",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"99999999999\"} 5",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"",
            "vllm:spec_decode_num_drafts_total{a=\"b\"} NaN",
            "SpecDecoding metrics: Accepted: é tokens, Drafted: 1e400 tokens, Per-position acceptance rate: x",
            "SpecDecoding metrics: Accepted: 3 tokens, Drafted: 0 tokens, Per-position acceptance rate: 0.5",
            "---Speculative Decoding---\nAcceptance length: \nPosition 1: 5",
            "Decode batch. accept len: inf",
            "ü{}}{{Position 0: 1",
            "accepted 4294967296/4 draft tokens",
            "accepted 3/ draft tokens",
            "accepted /99999 draft tokens",
            "accepted 1/4draft tokens",
            "accepted ",
            "statistics #calls(b,g,a) = 1 1 inf, #mean acc len = 2",
            "statistics #calls(b,g,a) = 1 1 0, #acc rate/pos = (",
            "statistics #calls(b,g,a) =",
        ];
        for l in lines {
            let _ = parse(l);
        }
        for zero in [
            "Decode batch. accept len: 0.00",
            "---Speculative Decoding---\nAcceptance length: 0.5\n",
        ] {
            assert!(parse(zero).is_err(), "{zero}");
        }
        let all = lines.join("\n");
        if let Ok(m) = parse(&all) {
            assert!(m.acceptance_length.is_finite());
            assert!(m.per_position.len() < 1024);
        }
    }

    #[test]
    fn llamacpp_per_step_lines_keep_their_order() {
        let text = "0.01.234.567 D accepted 2/4 draft tokens, the last target token is: (17)\n\
            some generated text accepted 9 tokens\n\
            0.01.240.000 D accepted 4/4 draft tokens, the last target token is: (3)\n\
            accepted 0/4 draft tokens, the last target token is: (5)\n\
            accepted 5/4 draft tokens (impossible: ignored)\n\
            n_drafted = 12\n";
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::LlamacppLog);
        assert_eq!(m.per_step_accepted, Some(vec![2, 4, 0]));
        assert_eq!(
            (m.drafts, m.draft_tokens, m.accepted_tokens),
            (Some(3.0), Some(12.0), Some(6.0))
        );
        assert!((m.acceptance_length - 3.0).abs() < 1e-12);
        // Position j: the share of steps that accepted more than j candidates.
        assert_eq!(
            m.per_position,
            vec![2.0 / 3.0, 2.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]
        );
    }

    #[test]
    fn llamacpp_statistics_line() {
        let text = "0.02.000.000 I statistics            draft: #calls(b,g,a) =    1     40     40, \
            #gen drafts =     40, #acc drafts =    30, #gen tokens =    160, #acc tokens =    90, \
            #mean acc len = 3.25, #acc rate/pos = (0.750, 0.600, 0.500, 0.400)\n";
        let m = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::LlamacppStats);
        assert_eq!(
            (m.drafts, m.draft_tokens, m.accepted_tokens),
            (Some(40.0), Some(160.0), Some(90.0))
        );
        assert!((m.acceptance_length - 3.25).abs() < 1e-12);
        assert_eq!(m.per_position, vec![0.75, 0.6, 0.5, 0.4]);
        assert!(parse("statistics draft: #calls(b,g,a) = 1 2").is_err());
    }

    #[test]
    fn sglang_accept_len_and_nothing() {
        let m = parse("[2026] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, accept len: 3.20, gen throughput (token/s): 100.0\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.format, MetricsFormat::SglangLog);
        assert!((m.acceptance_length - 3.2).abs() < 1e-12);
        assert!(parse("nothing here").is_err());
    }
}
