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

/// A sign-in's result, as the metrics tell outcomes apart.
pub(crate) trait SignInResult {
    fn outcome(&self) -> SignInOutcome;
}

fn first_step(signed_in: &SignIn) -> SignInOutcome {
    match signed_in {
        SignIn::Tokens(_) => SignInOutcome::Success,
        SignIn::SecondFactor(_) => SignInOutcome::SecondFactorRequired,
    }
}

impl SignInResult for Result<SignIn, LoginError> {
    fn outcome(&self) -> SignInOutcome {
        login_outcome(self.as_ref())
    }
}

fn login_outcome(result: Result<&SignIn, &LoginError>) -> SignInOutcome {
    match result {
        Ok(signed_in) => first_step(signed_in),
        Err(
            LoginError::InvalidCredentials
            | LoginError::PasswordExpired
            | LoginError::SsoRequired(_)
            | LoginError::NotAdmitted(_),
        ) => SignInOutcome::Failure,
        Err(LoginError::LockedOut(_)) => SignInOutcome::LockedOut,
        Err(LoginError::Store(_) | LoginError::Internal(_)) => SignInOutcome::Error,
    }
}

impl SignInResult for Result<TokenPair, VerifyError> {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Ok(_) => SignInOutcome::Success,
            Err(
                VerifyError::InvalidToken | VerifyError::WrongFactor | VerifyError::NotAdmitted(_),
            ) => SignInOutcome::Failure,
            Err(VerifyError::LockedOut(_)) => SignInOutcome::LockedOut,
            Err(VerifyError::Store(_) | VerifyError::Internal(_)) => SignInOutcome::Error,
        }
    }
}

impl SignInResult for Result<SamlSignedIn, SamlSignInError> {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Ok(_) => SignInOutcome::Success,
            Err(SamlSignInError::Store(_) | SamlSignInError::Internal(_)) => SignInOutcome::Error,
            Err(_) => SignInOutcome::Failure,
        }
    }
}

impl SignInResult for Result<SignIn, LinkError> {
    fn outcome(&self) -> SignInOutcome {
        match self {
            Ok(signed_in) => first_step(signed_in),
            Err(LinkError::LockedOut(_) | LinkError::RateLimited(_)) => SignInOutcome::LockedOut,
            Err(LinkError::Store(_) | LinkError::Internal(_)) => SignInOutcome::Error,
            Err(_) => SignInOutcome::Failure,
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
        } => login_outcome(Err(error)),
        _ => return,
    };
    state.metrics.sign_in(SignInMethod::Password, outcome);
}
