use std::{fmt, sync::Arc};

use async_trait::async_trait;
use gatehouse_domain::model::{PasswordCandidate, PasswordStrength};
use gatehouse_domain::ports::{JudgeError, PasswordJudge};
use tokio::sync::Semaphore;

use crate::blocking::{bounded, one_per_core};

/// The [`PasswordJudge`] over zxcvbn (Dropbox's guess estimator).
///
/// A judgment is a few milliseconds of CPU for an ordinary password and more for a long one
/// (zxcvbn reads the first 100 characters; the domain refuses more than 128 before asking): at
/// most `concurrency` run at once, each on tokio's blocking pool, the rest waiting without
/// holding a thread. The default, [`Self::default_concurrency`], is one per core.
#[derive(Clone)]
pub struct ZxcvbnJudge {
    permits: Arc<Semaphore>,
    concurrency: usize,
}

impl ZxcvbnJudge {
    /// Judgments at once by default: one per core the process may run on.
    pub fn default_concurrency() -> usize {
        one_per_core()
    }

    /// A judge running at most `concurrency` judgments at once (at least one).
    pub fn new(concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            concurrency,
        }
    }
}

impl Default for ZxcvbnJudge {
    fn default() -> Self {
        Self::new(Self::default_concurrency())
    }
}

impl fmt::Debug for ZxcvbnJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZxcvbnJudge")
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

/// zxcvbn's score of `password` (0 to 4) and its feedback, as one text, when it has any.
fn judge(password: &str, user_inputs: &[String]) -> PasswordStrength {
    let inputs: Vec<&str> = user_inputs.iter().map(String::as_str).collect();
    let entropy = zxcvbn::zxcvbn(password, &inputs);
    PasswordStrength {
        score: u8::from(entropy.score()),
        feedback: entropy
            .feedback()
            .map(|feedback| feedback.to_string().trim().to_owned())
            .filter(|text| !text.is_empty()),
    }
}

#[async_trait]
impl PasswordJudge for ZxcvbnJudge {
    async fn strength(
        &self,
        password: &PasswordCandidate,
        user_inputs: &[String],
    ) -> Result<PasswordStrength, JudgeError> {
        let password = password.clone();
        let user_inputs = user_inputs.to_vec();
        bounded(&self.permits, move || {
            judge(password.expose(), &user_inputs)
        })
        .await
        .map_err(|error| JudgeError(Box::new(error)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use gatehouse_domain::model::{
        password_user_inputs, NewPassword, PasswordError, PasswordPolicy,
    };

    use super::*;

    /// `raw` as a new password of Ada's, judged as the services do.
    async fn judged(raw: &str, user_inputs: &[String]) -> Result<NewPassword, PasswordError> {
        let candidate = PasswordCandidate::parse(raw, &PasswordPolicy::default())?;
        let strength = ZxcvbnJudge::default()
            .strength(&candidate, user_inputs)
            .await
            .unwrap();
        candidate.judged(strength)
    }

    async fn adas(raw: &str) -> Result<NewPassword, PasswordError> {
        judged(
            raw,
            &password_user_inputs("ada.lovelace@example.com", "Ada Lovelace"),
        )
        .await
    }

    #[tokio::test]
    async fn passwords_zxcvbn_scores_below_three_are_refused_with_its_feedback() {
        for weak in [
            "Password1!",
            "Summer2024!",
            "iloveyou1234",
            "password",
            "P@ssw0rd",
            "drowssap",
            "12345678",
            "password123",
            "qwertyuiop",
            "iloveyou",
            "football",
            "hunter2hunter2",
            "aaaaaaaaaaaa",
        ] {
            match adas(weak).await {
                Err(PasswordError::TooGuessable(feedback)) => {
                    assert!(!feedback.is_empty(), "{weak}")
                }
                other => panic!("{weak}: {other:?}"),
            }
        }
        let refused = adas("Password1!").await.unwrap_err().to_string();
        assert!(
            refused.starts_with("is too easy to guess: ") && refused.contains("common"),
            "{refused}"
        );
        for fine in [
            "correct horse battery staple",
            "a much longer new passphrase",
            "tr0ub4dor&3-anvil",
            "Xk7#mQ2$vL9p",
        ] {
            assert!(adas(fine).await.is_ok(), "{fine}");
        }
    }

    #[tokio::test]
    async fn what_the_person_is_known_by_counts_against_their_password() {
        let theirs =
            password_user_inputs("ottoline.vandersteen@example.com", "Ottoline Vandersteen");
        let someone_elses = password_user_inputs("grace@example.com", "Grace Hopper");
        for raw in ["vandersteen1815", "Ottoline.Vandersteen"] {
            let refused = judged(raw, &theirs).await;
            assert!(
                matches!(refused, Err(PasswordError::TooGuessable(_))),
                "{raw}: {refused:?}"
            );
            let accepted = judged(raw, &someone_elses).await;
            assert!(accepted.is_ok(), "{raw}: {accepted:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_judgments_at_once_all_finish_within_the_bound() {
        let judge = ZxcvbnJudge::new(2);
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let judge = judge.clone();
                tokio::spawn(async move {
                    let candidate = PasswordCandidate::parse(
                        &format!("a passphrase of its own, number {i}"),
                        &PasswordPolicy::default(),
                    )
                    .unwrap();
                    judge.strength(&candidate, &[]).await.unwrap().score
                })
            })
            .collect();
        for task in tasks {
            assert!(task.await.unwrap() >= NewPassword::MIN_SCORE);
        }
        assert_eq!(judge.permits.available_permits(), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_judgment_waits_for_a_free_slot() {
        let judge = ZxcvbnJudge::new(1);
        let held = judge.permits.clone().acquire_owned().await.unwrap();
        let waiting = tokio::spawn({
            let judge = judge.clone();
            async move {
                let candidate =
                    PasswordCandidate::parse("correct horse battery", &PasswordPolicy::default())
                        .unwrap();
                judge.strength(&candidate, &[]).await.unwrap()
            }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "judged without a slot");
        drop(held);
        assert!(waiting.await.unwrap().score >= NewPassword::MIN_SCORE);
    }

    #[test]
    fn the_default_is_one_per_core() {
        assert_eq!(
            ZxcvbnJudge::default().concurrency,
            ZxcvbnJudge::default_concurrency()
        );
        assert_eq!(ZxcvbnJudge::new(0).concurrency, 1);
    }
}
