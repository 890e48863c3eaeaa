//! Sign-in attempts counted in the metrics, as the handlers see them end: each handler that
//! signs someone in hands its result to [`sign_in`].

use gatehouse_domain::{
    ports::{SignInMethod, SignInOutcome},
    service::{
        AnswerRefused, Answered, LinkError, LoginError, SamlSignInError, SamlSignedIn, SignIn,
        TokenPair, VerifyError,
    },
};

use crate::AppState;

/// A sign-in's result, as the metrics tell outcomes apart: how it went through, or why not.
pub(crate) trait SignInResult {
    fn outcome(&self) -> SignInOutcome;
}

impl<T: SignInResult, E: SignInResult> SignInResult for Result<T, E> {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Ok(signed_in) => signed_in.outcome(),
            Err(refused) => refused.outcome(),
        }
    }
}

/// A first step: signed in, or a second factor asked for.
impl SignInResult for SignIn {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Self::Tokens(_) => SignInOutcome::Success,
            Self::SecondFactor(_) => SignInOutcome::SecondFactorRequired,
        }
    }
}

impl SignInResult for TokenPair {
    fn outcome(&self) -> SignInOutcome {
        SignInOutcome::Success
    }
}

impl SignInResult for SamlSignedIn {
    fn outcome(&self) -> SignInOutcome {
        SignInOutcome::Success
    }
}

impl SignInResult for LoginError {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Self::InvalidCredentials
            | Self::PasswordExpired
            | Self::SsoRequired(_)
            | Self::NotAdmitted(_) => SignInOutcome::Failure,
            Self::LockedOut(_) => SignInOutcome::LockedOut,
            Self::Store(_) | Self::Internal(_) => SignInOutcome::Error,
        }
    }
}

impl SignInResult for VerifyError {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Self::InvalidToken | Self::WrongFactor | Self::NotAdmitted(_) => SignInOutcome::Failure,
            Self::LockedOut(_) => SignInOutcome::LockedOut,
            Self::Store(_) | Self::Internal(_) => SignInOutcome::Error,
        }
    }
}

impl SignInResult for SamlSignInError {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Self::Store(_) | Self::Internal(_) => SignInOutcome::Error,
            _ => SignInOutcome::Failure,
        }
    }
}

impl SignInResult for LinkError {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Self::LockedOut(_) | Self::RateLimited(_) => SignInOutcome::LockedOut,
            Self::Store(_) | Self::Internal(_) => SignInOutcome::Error,
            _ => SignInOutcome::Failure,
        }
    }
}

/// Counts a sign-in attempt by its method and how it ended.
pub(crate) fn sign_in(state: &AppState, method: SignInMethod, result: &impl SignInResult) {
    state.metrics.sign_in(method, result.outcome());
}

/// Counts the password sign-in an answer on an invitation's page made, if it made one (the
/// signed-in invitee's click makes none).
pub(crate) fn invitation_answered(state: &AppState, answered: &Answered) {
    let outcome = match answered {
        Answered::Joined {
            opened: Some(_), ..
        }
        | Answered::AlreadyMember { opened: Some(_) } => SignInOutcome::Success,
        Answered::SecondFactor(_) => SignInOutcome::SecondFactorRequired,
        Answered::Again {
            refused: AnswerRefused::SignIn(error),
            ..
        } => error.outcome(),
        _ => return,
    };
    state.metrics.sign_in(SignInMethod::Password, outcome);
}
