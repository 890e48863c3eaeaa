DROP TABLE webauthn_registrations;
DROP TABLE mfa_logins;
DROP TABLE recovery_codes;
DROP TABLE mfa_factors;
