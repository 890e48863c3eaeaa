//! Passwords: a candidate as typed, checked against a [`PasswordPolicy`]; the
//! [`NewPassword`] the judge found hard enough to guess, which alone goes to the hasher; its
//! [`PasswordHash`]; and what a person is known by, for the judge.

use std::fmt;

use super::PasswordPolicy;

/// Why a new password was refused. The messages are shown to the person choosing it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// Fewer characters than the policy's minimum, which it carries.
    #[error("must be at least {0} characters")]
    TooShort(usize),
    /// More than [`NewPassword::MAX_CHARS`] characters.
    #[error("must be at most {} characters", NewPassword::MAX_CHARS)]
    TooLong,
    /// The policy asks for an uppercase letter and there is none.
    #[error("must contain an uppercase letter")]
    NoUppercase,
    /// The policy asks for a lowercase letter and there is none.
    #[error("must contain a lowercase letter")]
    NoLowercase,
    /// The policy asks for a digit and there is none.
    #[error("must contain a digit")]
    NoDigit,
    /// The policy asks for a special character and every character is a letter or a digit.
    #[error("must contain a special character")]
    NoSpecial,
    /// The [`PasswordJudge`](crate::ports::PasswordJudge) (zxcvbn) scores the password below
    /// [`NewPassword::MIN_SCORE`]: it would fall to a guessing attack. Carries the judge's
    /// feedback (what is wrong, what would help).
    #[error("is too easy to guess: {0}")]
    TooGuessable(String),
}

/// A password as typed that meets a policy's length and composition rules, not judged yet for
/// how easy it is to guess: only [`PasswordCandidate::judged`], with the
/// [`PasswordJudge`](crate::ports::PasswordJudge)'s verdict, makes the [`NewPassword`] the
/// hasher takes. Its `Debug` is redacted and it is never serialised.
#[derive(Clone)]
pub struct PasswordCandidate(String);

impl PasswordCandidate {
    /// A password as typed (not trimmed), checked against `policy` ([`Self::meets`]): the cheap,
    /// syntactic rules, the first it breaks being the error. Whether it is too easy to guess is
    /// the judge's to say ([`Self::judged`]).
    pub fn parse(raw: &str, policy: &PasswordPolicy) -> Result<Self, PasswordError> {
        let candidate = Self(raw.to_owned());
        candidate.meets(policy)?;
        Ok(candidate)
    }

    /// Whether the password meets `policy`'s length and composition rules (cheap: no strength
    /// judgment).
    pub fn meets(&self, policy: &PasswordPolicy) -> Result<(), PasswordError> {
        meets(&self.0, policy)
    }

    /// The plaintext, for the judge only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The password, once the judge scored it at least [`NewPassword::MIN_SCORE`];
    /// [`PasswordError::TooGuessable`] with the judge's feedback (or a general hint when it gave
    /// none) below that.
    pub fn judged(self, strength: PasswordStrength) -> Result<NewPassword, PasswordError> {
        if strength.score < NewPassword::MIN_SCORE {
            let feedback = strength
                .feedback
                .map(|text| text.trim().to_owned())
                .filter(|text| !text.is_empty())
                .unwrap_or_else(|| "Add another word or two. Uncommon words are better.".into());
            return Err(PasswordError::TooGuessable(feedback));
        }
        Ok(NewPassword(self.0))
    }
}

impl fmt::Debug for PasswordCandidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordCandidate(<redacted>)")
    }
}

/// How hard a password is to guess, as the [`PasswordJudge`](crate::ports::PasswordJudge)
/// scored it (zxcvbn's scale).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswordStrength {
    /// 0 (too guessable: under 10^3 guesses) to 4 (very unguessable: 10^10 guesses or more).
    pub score: u8,
    /// What is wrong with it and what would help, for the person choosing it; `None` when the
    /// judge has nothing to say.
    pub feedback: Option<String>,
}

/// A plaintext password that meets a policy and that the judge found hard enough to guess, on
/// its way to the hasher: made only by [`PasswordCandidate::judged`]. Its `Debug` is redacted
/// and it is never serialised.
#[derive(Clone)]
pub struct NewPassword(String);

impl NewPassword {
    /// Upper bound whatever the policy: argon2 would take anything, but a megabyte "password"
    /// is a denial-of-service attempt, not a secret.
    pub const MAX_CHARS: usize = 128;

    /// The lowest zxcvbn score a new password may have: 3, "safely unguessable: moderate
    /// protection from offline slow-hash scenario" (under 10^10 guesses scores 2 or less).
    pub const MIN_SCORE: u8 = 3;

    /// Whether the password meets `policy`'s length and composition rules (cheap: no strength
    /// judgment), for a password already judged when a stricter policy is learnt later.
    pub fn meets(&self, policy: &PasswordPolicy) -> Result<(), PasswordError> {
        meets(&self.0, policy)
    }

    /// The plaintext, for the hasher only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Whether `raw` meets `policy`'s length and composition rules; the first it breaks is the
/// error.
fn meets(raw: &str, policy: &PasswordPolicy) -> Result<(), PasswordError> {
    let chars = raw.chars().count();
    let min_length = policy.min_length.get() as usize;
    if chars < min_length {
        return Err(PasswordError::TooShort(min_length));
    }
    if chars > NewPassword::MAX_CHARS {
        return Err(PasswordError::TooLong);
    }
    if policy.require_uppercase && !raw.chars().any(char::is_uppercase) {
        return Err(PasswordError::NoUppercase);
    }
    if policy.require_lowercase && !raw.chars().any(char::is_lowercase) {
        return Err(PasswordError::NoLowercase);
    }
    if policy.require_numbers && !raw.chars().any(|c| c.is_ascii_digit()) {
        return Err(PasswordError::NoDigit);
    }
    if policy.require_special_chars && raw.chars().all(char::is_alphanumeric) {
        return Err(PasswordError::NoSpecial);
    }
    Ok(())
}

/// What a person is known by, as zxcvbn's user inputs: the address, its local part and the
/// words in it, the full name and each of its words. A password built from them
/// (`Lovelace1815!` for Ada Lovelace) is what anyone who knows whose it is tries first.
pub fn password_user_inputs(email: &str, full_name: &str) -> Vec<String> {
    let local = email.rsplit_once('@').map_or(email, |(local, _)| local);
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 3)
            .map(str::to_owned)
            .collect()
    };
    let mut inputs = vec![email.to_owned(), local.to_owned(), full_name.to_owned()];
    inputs.extend(words(local));
    inputs.extend(words(full_name));
    inputs.sort();
    inputs.dedup();
    inputs
}

impl fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewPassword(<redacted>)")
    }
}

/// A password hash in PHC string format (`$argon2id$v=19$...`).
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    /// A hash as the hasher made it or the store kept it, taken as it is.
    pub fn from_phc(phc: String) -> Self {
        Self(phc)
    }

    /// The PHC string, algorithm, parameters and salt included.
    pub fn as_phc(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::MinLength;

    fn parse(raw: &str, policy: &PasswordPolicy) -> Result<PasswordCandidate, PasswordError> {
        PasswordCandidate::parse(raw, policy)
    }

    fn scored(score: u8, feedback: Option<&str>) -> PasswordStrength {
        PasswordStrength {
            score,
            feedback: feedback.map(str::to_owned),
        }
    }

    #[test]
    fn default_policy_is_about_length() {
        let policy = PasswordPolicy::default();
        assert_eq!(
            parse("short", &policy).err(),
            Some(PasswordError::TooShort(8))
        );
        assert!(parse("correct horse battery", &policy).is_ok());
        assert_eq!(
            parse(&"x".repeat(129), &policy).err(),
            Some(PasswordError::TooLong)
        );
    }

    #[test]
    fn a_candidate_scored_below_three_is_refused_with_the_judges_feedback() {
        let candidate = || parse("correct horse battery", &PasswordPolicy::default()).unwrap();
        for score in 0..NewPassword::MIN_SCORE {
            assert_eq!(
                candidate()
                    .judged(scored(score, Some(" This is a very common password. ")))
                    .err(),
                Some(PasswordError::TooGuessable(
                    "This is a very common password.".into()
                ))
            );
        }
        for silent in [None, Some("  ")] {
            let refused = candidate().judged(scored(2, silent)).unwrap_err();
            assert_eq!(
                refused.to_string(),
                "is too easy to guess: Add another word or two. Uncommon words are better."
            );
        }
        for score in NewPassword::MIN_SCORE..=4 {
            let judged = candidate().judged(scored(score, Some("ignored"))).unwrap();
            assert_eq!(judged.expose(), "correct horse battery");
        }
    }

    #[test]
    fn what_the_person_is_known_by_are_words_of_their_address_and_name() {
        assert_eq!(
            password_user_inputs("ada.lovelace@example.com", "Ada Lovelace"),
            [
                "Ada",
                "Ada Lovelace",
                "Lovelace",
                "ada",
                "ada.lovelace",
                "ada.lovelace@example.com",
                "lovelace",
            ]
        );
    }

    #[test]
    fn composition_rules_apply_when_asked() {
        let policy = PasswordPolicy {
            min_length: MinLength::parse(10).unwrap(),
            require_uppercase: true,
            require_lowercase: true,
            require_numbers: true,
            require_special_chars: true,
            ..PasswordPolicy::default()
        };
        let check = |raw: &str| parse(raw, &policy).err();
        assert_eq!(check("abcdefghij"), Some(PasswordError::NoUppercase));
        assert_eq!(check("ABCDEFGHIJ"), Some(PasswordError::NoLowercase));
        assert_eq!(check("ABCDEfghij"), Some(PasswordError::NoDigit));
        assert_eq!(check("ABCDEfghi1"), Some(PasswordError::NoSpecial));
        assert_eq!(check("ABCDEfgh1!"), None);
        // A judged password is held to a stricter policy learnt later.
        let judged = parse("abcdefghij", &PasswordPolicy::default())
            .unwrap()
            .judged(scored(4, None))
            .unwrap();
        assert_eq!(judged.meets(&policy), Err(PasswordError::NoUppercase));
        assert!(parse("Tr0ub4dor&3-anvil", &policy).is_ok());
    }

    #[test]
    fn debug_never_shows_the_password() {
        let candidate = parse("hunter2-very-secret", &PasswordPolicy::default()).unwrap();
        assert!(!format!("{candidate:?}").contains("hunter2"));
        let password = candidate.judged(scored(4, None)).unwrap();
        assert!(!format!("{password:?}").contains("hunter2"));
        let hash = PasswordHash::from_phc("$argon2id$v=19$secret".into());
        assert!(!format!("{hash:?}").contains("secret"));
    }
}
