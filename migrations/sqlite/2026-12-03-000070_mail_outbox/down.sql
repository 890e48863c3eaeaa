DROP TABLE mail_outbox;
